package migration

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
)

// Rows changed behind enginemig's back in the shadow (no binlog event for the source) must be
// found by verification and repaired before the cut-over, whether verification runs after the
// copy or beside the index build (the table has a secondary index: binlog capture starts
// verification when the build does).
func TestVerifyFindsAndRepairsCorruptedShadow(t *testing.T) {
	for _, c := range []struct{ name, index string }{{"after the copy", ""}, {"beside the index build", ", KEY v (v)"}} {
		t.Run(c.name, func(t *testing.T) { verifyRepairs(t, c.index) })
	}
}

func verifyRepairs(t *testing.T, index string) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), f FLOAT, n INT NULL"+index+") ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, CONCAT('v', seq), seq / 7, IF(seq % 3 = 0, NULL, seq) FROM "+sandboxtest.Seq(20000),
		"CREATE TABLE ref LIKE t", "INSERT INTO ref SELECT * FROM t")
	shadow := dbconn.QualifiedName(schema, "_t_new")
	opts := testOptions(srv, schema, "t")
	if index != "" {
		// Verification beside the index build is what this case is about; the automatic pace
		// allows it only while the application leaves room, which a machine busy with other
		// tests can deny (CI once did). The pace's own decision is TestCopyBacksOffWhileTheApplicationIsSlowed's.
		opts.FixedPace = true
	}
	logs := &logLines{}
	opts.Logger = logs.logger()
	opts.Hook = func(ctx context.Context, at Point, _ *state.State) error {
		if at != After(state.StageCopy) {
			return nil
		}
		// One changed row, one missing row, one extra row, one NULL turned into a value.
		for _, q := range []string{
			"UPDATE " + shadow + " SET v = 'corrupted' WHERE id = 17",
			"DELETE FROM " + shadow + " WHERE id = 9000",
			"INSERT INTO " + shadow + " (id, v) VALUES (30000, 'ghost')",
			"UPDATE " + shadow + " SET n = 0 WHERE id = 3",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verify == nil || res.Verify.Repaired == 0 {
		t.Fatalf("verification repaired nothing: %+v", res.Verify)
	}
	t.Logf("verify: %+v", *res.Verify)
	if beside := strings.Contains(logs.String(), "verifying beside the index build"); beside != (index != "") {
		t.Fatalf("verification beside the index build: %v, want %v", beside, index != "")
	}
	if diff := sameRows(t, db, schema, "t", "ref", []string{"id", "v", "f", "n"}, "id"); diff != "" {
		t.Fatal(diff)
	}
	if diff := sameRows(t, db, schema, "ref", "t", []string{"id", "v", "f", "n"}, "id"); diff != "" {
		t.Fatal(diff)
	}
}

// The application's writers must not wait for a shadow that is behind while verification
// compares it. Here replay stalls (another session holds the shadow READ-locked for 600 ms; in
// production the index build's last phase takes its metadata lock) while writers write and
// verification runs in 2 ms chunks: with binlog capture (apply's default here) a chunk's lock
// covers the source's checksum only and the shadow is compared at a mark, unlocked
// (verify.compareMarked); a capture that waits for the shadow under the lock lets the source go
// after its patience (verify.patience). Either way no write may wait for the stall, and every
// acknowledged write must be in the converted table.
func TestVerifyLetsTheSourceGoWhileTheShadowIsBehind(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	const rows = 40000
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, 0 FROM "+sandboxtest.Seq(rows))
	const stall = 600 * time.Millisecond
	w := startIncrements(db, dbconn.QualifiedName(schema, "t"), rows, 4)
	// The stall starts once verification does: holding the shadow earlier would only delay the
	// catch-up before it.
	stalled := make(chan error, 1)
	var started atomic.Bool
	opts := testOptions(srv, schema, "t")
	// Verification in 2 ms chunks: many of them meet the stall. The copy before it at apply's
	// chunk time (its chunks have nothing to show here, and in 2 ms ones it was most of the time).
	opts.ChunkTime, opts.ProgressEvery = 2*time.Millisecond, 5*time.Millisecond
	hooks := faults.Hooks{CopyChunkTime: copier.DefaultChunkTime}
	opts.Progress = func(p Progress) {
		if p.Stage == state.StageVerify && started.CompareAndSwap(false, true) {
			go func() { stalled <- holdShadow(db, dbconn.QualifiedName(schema, "_t_new"), stall, w.measure) }()
		}
	}
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	w.stop()
	if err != nil {
		t.Fatal(err)
	}
	if !started.Load() {
		t.Fatal("verification ended before the shadow was stalled")
	}
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
	t.Logf("verify: %+v; longest write gap in the stall %s; %d writes", *res.Verify, w.maxGap, w.acked.Load())
	if w.maxGap > stall/2 {
		t.Errorf("writes waited %s while the shadow was stalled for %s: a chunk held the source through the stall", w.maxGap, stall)
	}
	var sum int64
	if err := db.QueryRow("SELECT SUM(v) FROM " + dbconn.QualifiedName(schema, "t")).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != w.acked.Load() || w.failed.Load() != 0 {
		t.Errorf("the converted table holds %d increments; %d writes were acknowledged, %d failed", sum, w.acked.Load(), w.failed.Load())
	}
}

// increments are writers that add 1 to v of rows of tbl, counting the acknowledged writes and,
// while measuring, the longest time between two.
type increments struct {
	acked, failed atomic.Int64
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	mu            sync.Mutex
	last          time.Time
	maxGap        time.Duration
	measuring     bool
}

func startIncrements(db *sql.DB, tbl string, rows, writers int) *increments {
	ctx, cancel := context.WithCancel(context.Background())
	w := &increments{cancel: cancel}
	for i := 0; i < writers; i++ {
		w.wg.Add(1)
		go func(i int) {
			defer w.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				id := 1 + (n*7919+i*104729)%rows
				if _, err := db.ExecContext(context.Background(), "UPDATE "+tbl+" SET v = v + 1 WHERE id = ?", id); err != nil {
					w.failed.Add(1)
					continue
				}
				w.acked.Add(1)
				now := time.Now()
				w.mu.Lock()
				if w.measuring {
					w.maxGap = max(w.maxGap, now.Sub(w.last))
				}
				w.last = now
				w.mu.Unlock()
				// Paced: on MySQL 9.7, writers in a tight loop hold the table so often that the
				// copy's reads, queued behind them, shrank to 50-row chunks waiting 1-2 s each.
				time.Sleep(time.Millisecond)
			}
		}(i)
	}
	return w
}

// measure starts or ends the measurement of gaps between writes.
func (w *increments) measure(on bool) {
	w.mu.Lock()
	w.measuring, w.last = on, time.Now()
	w.mu.Unlock()
}

func (w *increments) stop() {
	w.cancel()
	w.wg.Wait()
}

// holdShadow READ-locks the shadow for d from a session of its own, so that replay cannot write
// to it; measuring is told when the lock is taken, and 200 ms after it is let go.
func holdShadow(db *sql.DB, shadow string, d time.Duration, measuring func(bool)) error {
	conn, err := db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "LOCK TABLES "+shadow+" READ"); err != nil {
		return err
	}
	measuring(true)
	time.Sleep(d)
	_, err = conn.ExecContext(context.Background(), "UNLOCK TABLES")
	// Writes held up by the stall complete only after it: the gap they end must count.
	time.Sleep(200 * time.Millisecond)
	measuring(false)
	return err
}
