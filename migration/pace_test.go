package migration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/bench/arrival"
	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/state"
)

// paceApp is an application on two tables: each request reads a player by key and updates a row
// of its guild table, so a lock held on guilds slows the whole application. Its users arrive as a
// web application's do (bench/arrival: a missed slot is lost), 12 threads with one request every 20
// ms, about a third of what it serves running flat out on 2 cores: the pace bounds the
// application's throughput to 90 % of its usual, and a flat-out application loses some to any
// copy at all, so under one the copy would stay at its gentlest pace.
// done counts the requests served (both statements succeeded).
func paceApp(ctx context.Context, db *sql.DB, rows int, errs, done *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 26))
			slots := arrival.NewSlots(start.Add(time.Duration(i)*time.Millisecond), 20*time.Millisecond)
			for slots.Wait(ctx) == nil {
				var v int
				if err := db.QueryRow("SELECT v FROM players WHERE id = ?", 1+r.IntN(rows)).Scan(&v); err != nil {
					errs.Add(1)
				}
				if _, err := db.Exec("UPDATE guilds SET v = v + 1 WHERE id = ?", 1+r.IntN(100)); err != nil {
					errs.Add(1)
				} else {
					done.Add(1)
				}
			}
		}(i)
	}
	return &wg
}

// paceOf reads the pace level and rows copied from apply's control socket.
func paceOf(socket string) (level int, rows int64, stage string, ok bool) {
	reply, err := control.Send(context.Background(), socket, "status")
	if err != nil {
		return 0, 0, "", false
	}
	var st control.Status
	if json.Unmarshal([]byte(reply), &st) != nil || st.Pace == nil {
		return 0, 0, st.Stage, false
	}
	return st.Pace.Level, st.RowsCopied, st.Stage, true
}

// An application slowed by a lock another session holds on a table it uses makes the copy back
// off within a second, down to its gentlest pace while the slowdown lasts, and the copy speeds up
// again and finishes once the lock is gone.
func TestCopyBacksOffWhileTheApplicationIsSlowed(t *testing.T) {
	const rows = 200000
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE players (id INT PRIMARY KEY, v INT, name CHAR(40), KEY v (v)) ENGINE=MyISAM",
		"INSERT INTO players SELECT seq, seq % 1000, SHA1(seq) FROM "+sandboxtest.Seq(rows),
		"CREATE TABLE guilds (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO guilds SELECT seq, 0 FROM "+sandboxtest.Seq(100))
	appDB, _ := srv.Open(schema)
	appDB.SetMaxOpenConns(16)
	defer appDB.Close()
	ctx, stopApp := context.WithCancel(context.Background())
	var appErrs, served atomic.Int64
	app := paceApp(ctx, appDB, rows, &appErrs, &served)
	defer func() { stopApp(); app.Wait() }()
	time.Sleep(500 * time.Millisecond)
	usual := servedRate(&served, time.Second) // the application's throughput before the copy

	opts := testOptions(srv, schema, "players")
	opts.ControlSocket = filepath.Join(t.TempDir(), "ctl.sock")
	short := withHooks(context.Background(), faults.Hooks{IdleChunkTime: copier.DefaultChunkTime}) // short chunks throughout, so the copy lasts
	done := make(chan error, 1)
	go func() { _, err := Run(short, db, opts); done <- err }()
	waitForStage(t, opts.ControlSocket, state.StageCopy)

	holder, err := sdb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(context.Background(), "LOCK TABLES guilds WRITE"); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	first, lowest, backedOff := -1, 99, time.Duration(0)
	var rowsAtLock int64 = -1
	for time.Since(locked) < 3*time.Second {
		if level, copied, _, ok := paceOf(opts.ControlSocket); ok {
			if rowsAtLock < 0 {
				first, rowsAtLock = level, copied
			}
			if level < first && backedOff == 0 {
				backedOff = time.Since(locked)
			}
			lowest = min(lowest, level)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, rowsAtUnlock, _, _ := paceOf(opts.ControlSocket)
	if _, err := holder.ExecContext(context.Background(), "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	unlocked := time.Now()
	if rowsAtLock < 0 {
		t.Fatal("apply never reported its pace while the lock was held: it did not back off and ran on past the copy")
	}
	if first > 0 && (backedOff == 0 || backedOff > time.Second) || lowest > 3 {
		t.Fatalf("while the application waited for the lock the pace went from level %d down to %d (first back-off after %s), want a back-off within a second and level 3 or less (rests of four times a chunk's lock or more)",
			first, lowest, backedOff)
	}
	t.Logf("level %d when the lock was taken, backed off after %s, down to %d; %d rows copied while it was held", first, backedOff.Round(time.Millisecond), lowest, rowsAtUnlock-rowsAtLock)

	// After the lock the copy speeds up again as the application gets its throughput back: the
	// pace climbs a level each half second of calm, so within 8 s it is back at level 3 (rests of
	// four times a chunk's lock) or higher, or the copy is over. Whether the application got its
	// throughput back is its own count of requests served, against the same count before the copy:
	// on a machine busy with other work it may not, and then the copy rightly stays gentle. The
	// pace reported by the stages after the copy (index build, verification) is theirs.
	servedAtUnlock := served.Load()
	highest, copyOver := 0, false
	for time.Since(unlocked) < 8*time.Second && highest < 5 {
		level, _, stage, ok := paceOf(opts.ControlSocket)
		if stage != state.StageCopy.String() { // a later stage, or the run is over and its socket gone
			copyOver = true
			break
		}
		if ok {
			highest = max(highest, level)
		}
		time.Sleep(20 * time.Millisecond)
	}
	after := float64(served.Load()-servedAtUnlock) / time.Since(unlocked).Seconds()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("apply did not finish after the lock was gone")
	}
	recovered := after >= minShare*usual
	t.Logf("after the lock: pace up to level %d (copy over: %v); the application served %.0f requests/s, %.0f before the copy", highest, copyOver, after, usual)
	if recovered && !copyOver && highest < 3 {
		t.Errorf("after the lock the application served %.0f requests/s (%.0f before the copy), yet the copy's pace came back only to level %d within 8 s, want 3 or more", after, usual, highest)
	}
	if n := appErrs.Load(); n != 0 {
		t.Errorf("%d application statements failed", n)
	}
	if engineOf(t, db, schema, "players") != "InnoDB" {
		t.Fatal("not converted")
	}
	var n int
	db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM `%s`.players", schema)).Scan(&n)
	if n != rows {
		t.Errorf("%d rows after the conversion, want %d", n, rows)
	}
}

// minShare is the share of its usual throughput at which the application counts as recovered
// (the pace's own bound, throttle's minShare).
const minShare = 0.9

// servedRate is how many requests a second the counter rose over d.
func servedRate(c *atomic.Int64, d time.Duration) float64 {
	start, t0 := c.Load(), time.Now()
	time.Sleep(d)
	return float64(c.Load()-start) / time.Since(t0).Seconds()
}

// A table the copy takes in one chunk (copier.FirstChunkRows rows or fewer, or one with no unique
// key and no index to walk) is not paced: its result has no pace figures. One row more and it is.
func TestOnlyTablesOfMoreThanOneChunkArePaced(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	for _, c := range []struct {
		tbl   string
		ddl   string
		rows  int
		paced bool
	}{
		{"small", "id INT PRIMARY KEY, v INT", copier.FirstChunkRows, false},
		{"larger", "id INT PRIMARY KEY, v INT", copier.FirstChunkRows + 1, true},
		{"no_index", "id INT, v INT", copier.FirstChunkRows + 1, false},
	} {
		tbl := c.tbl
		sandboxtest.MustExec(t, sdb, "CREATE TABLE "+tbl+" ("+c.ddl+") ENGINE=MyISAM",
			"INSERT INTO "+tbl+" SELECT seq, seq FROM "+sandboxtest.Seq(c.rows))
		res, err := Run(context.Background(), db, testOptions(srv, schema, tbl))
		if err != nil {
			t.Fatalf("%s (%d rows): %v", tbl, c.rows, err)
		}
		if paced := res.Pace != nil; paced != c.paced {
			t.Errorf("%s (%d rows): paced %v, want %v", tbl, c.rows, paced, c.paced)
		}
	}
}
