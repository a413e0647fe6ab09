package cutover

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/pace/lockwait"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// caughtUp stands in for the replayer: these tests write nothing during the swap.
type caughtUp struct{}

func (caughtUp) WaitFor(ctx context.Context, conn *sql.Conn) (string, error) {
	p, err := binlog.CurrentPosition(ctx, conn)
	return fmt.Sprintf("%s:%d", p.Name, p.Pos), err
}

func (caughtUp) Hold()    {}
func (caughtUp) Release() {}

// recordFunc adapts a function to Recorder.
type recordFunc func(context.Context, string) error

func (f recordFunc) RecordSwap(ctx context.Context, p string) error { return f(ctx, p) }

func setup(t *testing.T) (string, *sql.DB) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	db.SetMaxOpenConns(20)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(4000),
		"CREATE TABLE _t_new (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
		"INSERT INTO _t_new SELECT * FROM t")
	return schema, db
}

func engine(db *sql.DB, name string) string {
	var e sql.NullString
	db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA=DATABASE() AND TABLE_NAME=?", name).Scan(&e)
	return e.String
}

// readers run primary-key SELECTs and record the longest one: the stall the application saw.
func readers(ctx context.Context, db *sql.DB, n int) (wait func() (time.Duration, int64)) {
	var wg sync.WaitGroup
	var longest atomic.Int64
	var errs atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				var v int
				if err := db.QueryRow("SELECT v FROM t WHERE id = ?", 1+i).Scan(&v); err != nil {
					errs.Add(1)
				}
				if d := int64(time.Since(start)); d > longest.Load() {
					longest.Store(d)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	return func() (time.Duration, int64) { wg.Wait(); return time.Duration(longest.Load()), errs.Load() }
}

func fastConfig() Config {
	return Config{LockWait: 200 * time.Millisecond, CatchUp: 500 * time.Millisecond, Attempts: 40,
		Backoff: 100 * time.Millisecond, LongQuery: 100 * time.Millisecond}
}

func swapOf(schema string) Swap {
	return Swap{Schema: schema, From: "t", To: "_t_new", Aside: "_t_old", Sentry: "t_emswap"}
}

func TestSwapWaitsForLongSelectWithoutStallingReaders(t *testing.T) {
	schema, db := setup(t)
	// A report query holding MyISAM's read lock for about 2 s.
	longDone := make(chan error, 1)
	go func() {
		_, err := db.Exec("SELECT COUNT(*) FROM t WHERE SLEEP(0.0005) = 0")
		longDone <- err
	}()
	time.Sleep(150 * time.Millisecond)
	ctx, stop := context.WithCancel(context.Background())
	wait := readers(ctx, db, 4)
	res, err := Run(context.Background(), db, swapOf(schema), caughtUp{}, fastConfig(), nil)
	if e := <-longDone; e != nil {
		t.Fatalf("long select: %v", e)
	}
	time.Sleep(100 * time.Millisecond)
	stop()
	longest, errs := wait()
	if err != nil {
		t.Fatalf("swap: %v", err)
	}
	if engine(db, "t") != "InnoDB" || engine(db, "_t_old") != "MyISAM" || engine(db, "_t_new") != "" {
		t.Fatal("tables not swapped")
	}
	t.Logf("attempts %d, lock held %s, longest reader %s", res.Attempts, res.LockHeld, longest)
	if errs > 0 {
		t.Fatalf("%d reader errors", errs)
	}
	// The budget is LockWait per attempt; allow scheduling noise on a loaded 2-core machine.
	if longest > 700*time.Millisecond {
		t.Fatalf("a reader waited %s: the cut-over queued behind the long query", longest)
	}
}

func TestSwapUnderHeldReadLockKeepsStallsWithinBudgetAndGivesUpCleanly(t *testing.T) {
	schema, db := setup(t)
	// LOCK TABLES ... READ is invisible as a query in the process list: only the lock budget
	// protects the application here.
	holder, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var holderID int64
	holder.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&holderID)
	if _, err := holder.ExecContext(context.Background(), "LOCK TABLES t READ"); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	wait := readers(ctx, db, 4)
	cfg := fastConfig()
	cfg.Attempts = 3
	obs := &attempts{}
	cfg.Observer = obs
	_, err = Run(context.Background(), db, swapOf(schema), caughtUp{}, cfg, nil)
	stop()
	longest, errs := wait()
	holder.ExecContext(context.Background(), "UNLOCK TABLES")
	if !errors.Is(err, ErrGaveUp) {
		t.Fatalf("want ErrGaveUp, got %v", err)
	}
	if engine(db, "t") != "MyISAM" || engine(db, "_t_new") != "InnoDB" || engine(db, "_t_old") != "" || engine(db, "t_emswap") != "" {
		t.Fatal("tables changed by a failed cut-over (or sentry left behind)")
	}
	// Each failed attempt names the session holding the table, and the observer saw each.
	if !strings.Contains(err.Error(), fmt.Sprintf("connection %d (user root", holderID)) || obs.notGranted != 3 {
		t.Errorf("observer saw %d attempts not granted (want 3); error %v does not name the holder %d", obs.notGranted, err, holderID)
	}
	if errs > 0 {
		t.Fatalf("%d reader errors", errs)
	}
	t.Logf("longest reader stall %s with lock wait budget %s", longest, cfg.LockWait)
	if longest > cfg.LockWait+400*time.Millisecond {
		t.Fatalf("a reader waited %s, budget %s", longest, cfg.LockWait)
	}
}

func TestKillingLockHolderMidSwapLeavesOriginal(t *testing.T) {
	schema, db := setup(t)
	cfg := fastConfig()
	cfg.Attempts = 1
	ctx := withHooks(context.Background(), faults.Hooks{OnRenameQueued: func(id int64) {
		if _, err := db.Exec(fmt.Sprintf("KILL %d", id)); err != nil {
			t.Errorf("kill: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // let the rename run into the sentry
	}})
	_, err := Run(ctx, db, swapOf(schema), caughtUp{}, cfg, nil)
	if !errors.Is(err, ErrGaveUp) {
		t.Fatalf("want ErrGaveUp, got %v", err)
	}
	if engine(db, "t") != "MyISAM" || engine(db, "_t_new") != "InnoDB" || engine(db, "_t_old") != "" || engine(db, "t_emswap") != "" {
		t.Fatalf("after killed swap: t=%s _t_new=%s _t_old=%s", engine(db, "t"), engine(db, "_t_new"), engine(db, "_t_old"))
	}
	var n, sum int
	if err := db.QueryRow("SELECT COUNT(*), SUM(v) FROM t").Scan(&n, &sum); err != nil || n != 4000 || sum != 4000*4001/2 {
		t.Fatalf("original changed: %d rows, sum %d, %v", n, sum, err)
	}
	// And a later attempt, without the kill, still works.
	if _, err := Run(context.Background(), db, swapOf(schema), caughtUp{}, cfg, nil); err != nil {
		t.Fatalf("retry after kill: %v", err)
	}
	if engine(db, "t") != "InnoDB" {
		t.Fatal("retry did not swap")
	}
}

// No application write may land in the old table once the cut-over holds the lock: such a write
// would be acknowledged but missing from the new table. The rename must be queued on the table
// itself (not on the sentry) when the lock is released, so it goes before the queued writes.
func TestNoWriteLandsInOldTableAfterLock(t *testing.T) {
	for round := 0; round < 5; round++ {
		schema, db, stop := insertingInto(t, 12)
		var lockedAt atomic.Int64
		cfg := fastConfig()
		res, err := Run(context.Background(), db, swapOf(schema), caughtUp{}, cfg, recordFunc(func(context.Context, string) error {
			lockedAt.Store(time.Now().UnixNano())
			return nil
		}))
		time.Sleep(50 * time.Millisecond)
		stop()
		if err != nil {
			t.Fatalf("swap: %v", err)
		}
		var late int
		db.QueryRow("SELECT COUNT(*) FROM _t_old WHERE at > ?", lockedAt.Load()).Scan(&late)
		if late > 0 {
			t.Fatalf("round %d: %d writes that started after the table was locked went to the old table (lock held %s)", round, late, res.LockHeld)
		}
	}
}

// A long query on a same-named table of another database does not count; one on ours does.
func TestLongQueriesOnlyCountsThisDatabase(t *testing.T) {
	schema, db := setup(t)
	_, other := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, other, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MyISAM", "INSERT INTO t SELECT seq FROM "+sandboxtest.Seq(2000))
	done := make(chan struct{})
	go func() {
		other.Exec("SELECT COUNT(*) FROM t WHERE SLEEP(0.0005) = 0")
		close(done)
	}()
	time.Sleep(300 * time.Millisecond)
	ids, err := LongQueries(context.Background(), db, schema, "t", 100*time.Millisecond)
	if err != nil || len(ids) != 0 {
		t.Fatalf("another database's query counted: %v %v", ids, err)
	}
	<-done
	go db.Exec("SELECT COUNT(*) FROM t WHERE SLEEP(0.0005) = 0")
	time.Sleep(300 * time.Millisecond)
	ids, err = LongQueries(context.Background(), db, schema, "t", 100*time.Millisecond)
	if err != nil || len(ids) != 1 {
		t.Fatalf("our own long query not found: %v %v", ids, err)
	}
}

// attempts counts the attempts whose lock was not granted.
type attempts struct{ notGranted int }

func (a *attempts) Waiting(lockwait.Wait) (func(string, []lockwait.Session), func()) {
	return func(string, []lockwait.Session) {}, func() {}
}

func (a *attempts) Attempted(_ int, _ time.Duration, err error) {
	if errors.Is(err, ErrLockNotGranted) {
		a.notGranted++
	}
}
