package shadow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/shadow/verify"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// open prepares t (MyISAM, rows) and an empty InnoDB target, and opens a pipeline into it
// (binlog capture, unless a with changes its Config).
func open(t *testing.T, rows int, with ...func(*Config)) (*Pipeline, string, *dbconn.Config) {
	t.Helper()
	return openUnder(context.Background(), t, rows, with...)
}

// openUnder is open with the pipeline opened under ctx (which may carry a test's hooks).
func openUnder(ctx context.Context, t *testing.T, rows int, with ...func(*Config)) (*Pipeline, string, *dbconn.Config) {
	t.Helper()
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_"+strconv.Itoa(rows),
		"CREATE TABLE tgt LIKE t", "ALTER TABLE tgt ENGINE=InnoDB")
	conn := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	db, err := dbconn.Open(context.Background(), conn, "", 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ti, err := table.Load(context.Background(), db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Conn: conn, DB: db, Source: ti, Target: "tgt", Version: "10.11.0-MariaDB", ServerID: 1<<30 + rand.Uint32N(1<<30)}
	for _, w := range with {
		w(&cfg)
	}
	p, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, schema, &conn
}

// copied is open's pipeline with t copied and the target caught up.
func copied(t *testing.T, rows int) *Pipeline {
	t.Helper()
	p, _, _ := open(t, rows)
	if err := p.Copy(context.Background(), nil, nil, copier.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// Writers change the source while the pipeline copies it; afterwards the target equals the source
// without verification having to repair anything.
func TestPipelineKeepsTargetEqualUnderWrites(t *testing.T) {
	p, schema, _ := open(t, 20000)
	sdb := p.cfg.DB
	q := dbconn.QualifiedName(schema, "t")
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				id := 1 + r.IntN(25000)
				switch r.IntN(3) {
				case 0:
					sdb.Exec("UPDATE "+q+" SET v = CONCAT('u', RAND()) WHERE id = ?", id)
				case 1:
					sdb.Exec("DELETE FROM "+q+" WHERE id = ?", id)
				default:
					sdb.Exec("REPLACE INTO "+q+" VALUES (?, 'ins')", id)
				}
			}
		}()
	}
	err := p.Copy(context.Background(), nil, nil, copier.Config{Pace: copier.Pace{ChunkTime: time.Millisecond, IdleChunkTime: time.Millisecond}, ClientSide: true})
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := p.Verify(context.Background(), copier.Pace{})
	if err != nil || res.Repaired > 0 {
		t.Fatalf("verify %+v, %v: the target drifted from the source", res, err)
	}
	var diff int
	sdb.QueryRow("SELECT COUNT(*) FROM " + q + " s LEFT JOIN " + dbconn.QualifiedName(schema, "tgt") + " d USING (id) WHERE d.v IS NULL OR d.v <> s.v").Scan(&diff)
	if diff != 0 || res.Rows == 0 {
		t.Fatalf("%d rows differ after %d verified", diff, res.Rows)
	}
}

// A capture failure (DDL on the source) ends whatever pipeline step runs, with ErrCapture.
func TestCaptureFailureStopsTheRunningStep(t *testing.T) {
	p, schema, _ := open(t, 100)
	done := make(chan error, 1)
	go func() {
		done <- p.Do(context.Background(), func(ctx context.Context) error {
			<-ctx.Done() // a step that would run forever
			return ctx.Err()
		})
	}()
	if _, err := p.cfg.DB.Exec("ALTER TABLE " + dbconn.QualifiedName(schema, "t") + " ADD COLUMN x INT"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrCapture) || !errors.Is(err, binlog.ErrTableChanged) {
			t.Fatalf("want the capture's DDL error, got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the running step was not stopped by the capture failure")
	}
	if err := p.CatchUp(context.Background()); !errors.Is(err, ErrCapture) {
		t.Fatalf("later steps must report the failure too, got %v", err)
	}
}

// Verification may run beside the index build (StartVerify), but its repairs lock the source with
// the target: one that waited behind the build's metadata lock would hold the source's lock, and
// the application's writes, meanwhile. So a repair (verifyTarget.Exclusive) waits for Build.
func TestRepairWaitsForTheIndexBuild(t *testing.T) {
	p, _, _ := open(t, 100)
	const build = 500 * time.Millisecond
	done := make(chan struct{})
	started := time.Now()
	go func() {
		defer close(done)
		// Stands for a long ALTER TABLE ... ADD INDEX on the target.
		err := p.Build(context.Background(), func(ctx context.Context) error {
			_, err := p.cfg.DB.ExecContext(ctx, fmt.Sprintf("DO SLEEP(%g)", build.Seconds()))
			return err
		})
		if err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(100 * time.Millisecond) // let the build start
	var repaired time.Time
	if err := (verifyTarget{p}).Exclusive(func() error { repaired = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	<-done
	// The build cannot end before its SLEEP has: a repair that waited for it runs at least that
	// long after the build started. (Comparing with a time the builder takes after its Build
	// returns would race the repair for the clock.)
	if waited := repaired.Sub(started); waited < build {
		t.Fatalf("a repair ran %s after a %s index build started", waited, build)
	}
}

// boundRoom is a pace's Room at full speed whose latency target bounds every chunk's lock to bound.
type boundRoom struct{ bound time.Duration }

func (boundRoom) RestRatio() float64         { return 0 }
func (boundRoom) Workers(limit int) int      { return limit }
func (r boundRoom) LockBound() time.Duration { return r.bound }

// Verification takes the latency target's bound on a chunk's lock where the capture marks the
// target (binlog capture: a chunk's lock covers the source's checksum only, which the bound sizes),
// and not where a chunk holds the source while the target catches up (trigger capture: unbounded),
// whatever its rows, where a bound would only multiply the chunks. With a bound of 50 µs, which
// shrinks every bounded chunk to the smallest, binlog capture walks in many more chunks than
// without one, trigger capture in as many.
func TestVerifyTakesTheLatencyBoundWhereTheCaptureMarks(t *testing.T) {
	for _, c := range []struct {
		name  string
		mode  Mode
		takes bool
	}{{"binlog", Binlog, true}, {"triggers", Triggers, false}} {
		t.Run(c.name, func(t *testing.T) {
			p, _, _ := open(t, 20000, func(cfg *Config) {
				if cfg.Mode = c.mode; c.mode == Triggers {
					cfg.ChangeLog = table.ChangeLogName("t", false)
				}
			})
			if err := p.Copy(context.Background(), nil, nil, copier.Config{}); err != nil {
				t.Fatal(err)
			}
			free, err := p.Verify(context.Background(), copier.Pace{Room: boundRoom{}})
			if err != nil {
				t.Fatal(err)
			}
			bound, err := p.Verify(context.Background(), copier.Pace{Room: boundRoom{50 * time.Microsecond}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d chunks without a bound, %d with", free.Chunks, bound.Chunks)
			if took := bound.Chunks > 2*free.Chunks+2; took != c.takes {
				t.Fatalf("verification took the latency bound: %v, want %v (%d chunks with it, %d without)", took, c.takes, bound.Chunks, free.Chunks)
			}
		})
	}
}

// reportingRoom is boundRoom that counts the locks reported to it (copier.LockReporter).
type reportingRoom struct {
	boundRoom
	held atomic.Int64
}

func (r *reportingRoom) Held(from, to time.Time) { r.held.Add(1) }

// Verification's chunks report their locks to the Room, as the copy's do, bound or not: the
// latency target needs them to tell the application's reads that waited for a chunk.
func TestVerifyReportsItsLocksToTheRoom(t *testing.T) {
	p := copied(t, 20000)
	room := &reportingRoom{}
	res, err := p.Verify(context.Background(), copier.Pace{Room: room})
	if err != nil {
		t.Fatal(err)
	}
	// The walk reports a chunk's lock when it plans the next chunk: every one but the last.
	if got := room.held.Load(); got < int64(res.Chunks-1) || res.Chunks < 2 {
		t.Fatalf("verification walked %d chunks and reported %d locks to the Room", res.Chunks, got)
	}
}

// Verification's catch-up under its lock brings trigger capture's notes into the target in
// batches, and lets the source go at the chunk's patience: a backlog synced in one statement
// held the source (and the application's writes) until it was all written, however short the
// chunk's patience (a statement cancelled at its deadline goes on in the server). Here periodic
// syncs are off and a note for every row waits when verification begins. The test looks at the
// mechanism, not at the writer's waits, which on a busy machine vary as much as a larger
// backlog would make them grow: no sync wrote more than a batch, and verification let the source
// go rather than sync the backlog under a chunk's lock.
func TestVerifySyncsABacklogInBatches(t *testing.T) {
	const rows = 100000
	longest, res, largest := verifyBacklog(t, rows)
	t.Logf("%d notes waiting: the writer's longest wait %s, the largest sync %d notes", rows, longest, largest)
	if largest == 0 {
		t.Errorf("no sync seen: the test's hooks (SyncEvery, Synced) did not reach trigger capture")
	}
	if largest > syncMaxNotes {
		t.Errorf("a sync wrote %d notes at once; want batches of at most %d", largest, syncMaxNotes)
	}
	if res.Repaired > 0 || res.BehindRetries == 0 {
		t.Errorf("verification repaired %d chunks and let the source go %d times; want none repaired, and the backlog synced unlocked", res.Repaired, res.BehindRetries)
	}
}

// verifyBacklog verifies a target equal to a source of rows rows after each row was changed once
// with trigger capture's periodic syncs off, and returns the longest wait of a writer meanwhile
// and the most notes one sync wrote.
func verifyBacklog(t *testing.T, rows int) (time.Duration, verify.Result, int64) {
	t.Helper()
	var largest atomic.Int64
	// Verification's syncs run under its own context: the hooks go to Verify as to Open.
	hooked := withHooks(context.Background(), faults.Hooks{SyncEvery: time.Hour, Synced: func(n int64) {
		for old := largest.Load(); n > old && !largest.CompareAndSwap(old, n); old = largest.Load() {
		}
	}})
	p, schema, _ := openUnder(hooked, t, rows, func(c *Config) {
		c.Mode, c.ChangeLog, c.Filled = Triggers, table.ChangeLogName("t", false), true
	})
	sdb := p.cfg.DB
	sandboxtest.MustExec(t, sdb, "INSERT INTO "+dbconn.QualifiedName(schema, "tgt")+" SELECT * FROM "+dbconn.QualifiedName(schema, "t"))
	q := dbconn.QualifiedName(schema, "t")
	sandboxtest.MustExec(t, sdb, "UPDATE "+q+" SET v = CONCAT('u', id)") // a note a row
	ctx, stop := context.WithCancel(context.Background())
	var longest time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		for last := time.Now(); ctx.Err() == nil; time.Sleep(time.Millisecond) {
			if _, err := sdb.Exec("UPDATE " + q + " SET v = 'w' WHERE id = 1"); err != nil {
				t.Error(err)
				return
			}
			now := time.Now()
			longest, last = max(longest, now.Sub(last)), now
		}
	}()
	res, err := p.Verify(hooked, copier.Pace{})
	stop()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows: verify %+v", rows, res)
	return longest, res, largest.Load()
}
