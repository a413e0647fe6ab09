package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/cleanup"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/plan"
	"github.com/enginemig/enginemig/shadow"
)

// Servers without a usable ROW binlog, where --capture auto chooses triggers: one with the binlog
// off, one with binlog_format=STATEMENT. Each test starts its own.
var noRowBinlog = []string{"OFF", "STATEMENT"}

// The central claim, with trigger capture: writers on every column type during copy and cut-over,
// then during a rollback, and the table equals the reference after each. With the binlog off the
// copy runs two chunks at once throughout; with STATEMENT it is client-side.
func TestTriggerCaptureConcurrentWritersAndRollback(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	for _, format := range noRowBinlog {
		t.Run("binlog-"+strings.ToLower(format), func(t *testing.T) {
			s := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: format})
			schema, db, ws := concurrentWriters(t, s, appPause, func(o *Options, h *faults.Hooks) {
				o.ClientSide = format == "STATEMENT"
				if format == "OFF" { // parallel chunks against the syncs (rule 3), every other one overtaken
					o.CopyWorkers, h.CopyAlwaysParallel, h.OvertakeDelay = 2, true, 30*time.Millisecond
				}
			})
			if st := lastState(t, db, schema); st.CaptureMode() != shadow.Triggers {
				t.Fatalf("auto chose %q capture on a server with binlog %s", st.Capture, format)
			}
			stop := runWriters(ws, appPause)
			res, err := rollback.Run(context.Background(), db, rollback.Options{Conn: connConfig(s), Schema: schema, Table: "t",
				StateSchema: "_enginemig_test", Logger: testOptions(s, schema, "t").Logger})
			time.Sleep(200 * time.Millisecond)
			stop()
			if err != nil {
				t.Fatalf("rollback: %v", err)
			}
			checkWriters(t, ws)
			if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
				t.Fatalf("t is %s after the rollback", e)
			}
			if diff := sameRows(t, db, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
				t.Fatalf("after the rollback the table differs from the reference: %s", diff)
			}
			if diff := sameRows(t, db, schema, "ref", "t", allTypesColumns, "id"); diff != "" {
				t.Fatalf("after the rollback the reference differs from the table: %s", diff)
			}
			assertNoCaptureLeft(t, db, schema)
			t.Logf("rollback: %+v", res.Cutover)
		})
	}
}

// Transactions that write the MyISAM table and roll back keep their MyISAM changes (and so does a
// multi-row INSERT that fails half-way): the converted table must keep them too. Triggers that
// wrote the InnoDB shadow directly would lose each of them with the transaction.
func TestTriggerCaptureExplicitTransactions(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	s := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: "OFF"})
	schema, db := sandboxtest.FreshDatabase(t, s)
	for _, tbl := range []string{"t", "ref"} {
		sandboxtest.MustExec(t, db, "CREATE TABLE "+dbconn.QualifiedName(schema, tbl)+" (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(20)) ENGINE=MyISAM",
			"INSERT INTO "+dbconn.QualifiedName(schema, tbl)+" SELECT seq, 0, 'seed' FROM seq_1_to_30000")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var done, failed atomic.Int64
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			txWriter(ctx, t, db, schema, w, &done, &failed)
		}()
	}
	opts := testOptions(s, schema, "t")
	hooks := faults.Hooks{CopyChunkTime: 2 * time.Millisecond} // many small copy chunks under the writers; verification at apply's chunk time
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("migration failed: %v", err)
	}
	t.Logf("transactions %d (%d with an error, as intended), verify %+v", done.Load(), failed.Load(), res.Verify)
	if done.Load() < 50 {
		t.Fatalf("only %d transactions ran: the test did not exercise them", done.Load())
	}
	if diff := sameRows(t, db, schema, "t", "ref", []string{"id", "k", "v"}, "id"); diff != "" {
		ids := strings.Fields(diff[strings.LastIndex(diff, "[")+1 : strings.LastIndex(diff, "]")])
		for _, id := range ids[:min(3, len(ids))] {
			t.Log(dumpRow(t, db, schema, "id", id, []string{"id", "k", "v"}, "t", "ref", "_t_old"))
		}
		t.Fatalf("converted table differs from the reference: %s", diff)
	}
	if diff := sameRows(t, db, schema, "ref", "t", []string{"id", "k", "v"}, "id"); diff != "" {
		t.Fatalf("reference differs from the converted table: %s", diff)
	}
}

// txWriter runs transactions on t that it rolls back or commits at random, some left open for a
// while, and multi-row INSERTs that fail on a duplicate key after their first row. ref (MyISAM,
// never converted) then gets what t kept: everything while t was MyISAM, committed work once it
// is InnoDB. A transaction is on one side of the swap or the other: the swap's lock waits for it.
func txWriter(ctx context.Context, t *testing.T, db *sql.DB, schema string, w int, done, failed *atomic.Int64) {
	r := rand.New(rand.NewPCG(uint64(w), 7))
	tbl, ref := dbconn.QualifiedName(schema, "t"), dbconn.QualifiedName(schema, "ref")
	next := 1_000_000 * (w + 1)
	bg := context.Background()
	for ctx.Err() == nil {
		conn, err := db.Conn(bg)
		if err != nil {
			t.Error(err)
			return
		}
		// Each writer owns the seeded ids ≡ w (mod 3): t and ref get its statements one after the
		// other, and another writer's statement on the same id in between would make them differ
		// (seen once with one core busy: a duplicate's row in t, deleted in ref).
		id := 1 + w + 3*r.IntN(10000)
		next++
		stmts := []string{
			fmt.Sprintf("UPDATE %%s SET k = k + 1, v = 'tx%d' WHERE id = %d", w, id),
			fmt.Sprintf("INSERT INTO %%s VALUES (%d, 1, 'txins')", next),
			fmt.Sprintf("DELETE FROM %%s WHERE id = %d", 1+w+3*r.IntN(10000)),
		}
		conn.ExecContext(bg, "BEGIN")
		for _, st := range stmts {
			if _, err := conn.ExecContext(bg, fmt.Sprintf(st, tbl)); err != nil {
				t.Errorf("writer %d: %v", w, err)
			}
		}
		if r.IntN(4) == 0 {
			time.Sleep(30 * time.Millisecond) // open across chunks, verification and the cut-over's lock wait
		}
		// The engine the statements wrote: the swap cannot happen while this transaction holds
		// the table's metadata lock.
		var engine string
		conn.QueryRowContext(bg, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'", schema).Scan(&engine)
		end := "ROLLBACK"
		if r.IntN(2) == 0 {
			end = "COMMIT"
		}
		if _, err := conn.ExecContext(bg, end); err != nil {
			t.Errorf("writer %d: %s: %v", w, end, err)
		}
		if engine == "MyISAM" || end == "COMMIT" {
			for _, st := range stmts {
				db.Exec(fmt.Sprintf(st, ref))
			}
		}
		// A multi-row INSERT whose second row is a duplicate: MyISAM keeps the first, InnoDB not.
		next++
		dup := fmt.Sprintf("INSERT INTO %%s VALUES (%d, 2, 'partial'), (%d, 2, 'dup')", next, id)
		if _, err := conn.ExecContext(bg, fmt.Sprintf(dup, tbl)); err == nil {
			db.Exec(fmt.Sprintf(dup, ref)) // the duplicate had been deleted
		} else {
			failed.Add(1)
			var kept int
			conn.QueryRowContext(bg, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE id = %d", tbl, next)).Scan(&kept)
			if kept == 1 {
				db.Exec(fmt.Sprintf("INSERT INTO %s VALUES (%d, 2, 'partial')", ref, next))
			}
		}
		conn.Close()
		done.Add(1)
	}
}

// On a server without a binlog, a user without the TRIGGER privilege is refused with the grant
// named, and nothing is created. (--capture binlog there: TestPreflightRefusesBinlogCaptureWithoutRowBinlog.)
func TestTriggerCaptureRefusesWithoutTriggerPrivilege(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: "OFF"})
	schema, db := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, db, "CREATE TABLE "+dbconn.QualifiedName(schema, "t")+" (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO "+dbconn.QualifiedName(schema, "t")+" VALUES (1,1),(2,2)")

	sandboxtest.MustExec(t, db, "CREATE USER 'notrig'@'%' IDENTIFIED BY 'pw'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, LOCK TABLES ON *.* TO 'notrig'@'%'")
	t.Cleanup(func() { db.Exec("DROP USER 'notrig'@'%'") })
	cfg := connConfig(s)
	cfg.User, cfg.Password = "notrig", "pw"
	limited, err := dbconn.Open(context.Background(), cfg, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Close()
	opts := testOptions(s, schema, "t")
	opts.Conn = cfg
	opts.StateSchema = "_enginemig_test_notrig"
	_, err = Run(context.Background(), limited, opts)
	t.Logf("refusal: %v", err)
	if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "TRIGGER") {
		t.Fatalf("without the TRIGGER privilege: want a refusal naming TRIGGER, got %v", err)
	}
	for _, name := range []string{"_t_new", "t_emchg"} {
		if tableExists(t, db, schema, name) {
			t.Errorf("%s was created by a refused run", name)
		}
	}
	assertNoCaptureLeft(t, db, schema)
}

func checkWriters(t *testing.T, ws []*writer) {
	t.Helper()
	for _, w := range ws {
		if len(w.failures) > 0 {
			t.Errorf("writer %d: %d failed writes, first: %s", w.id, len(w.failures), w.failures[0])
		}
	}
}

func lastState(t *testing.T, db *sql.DB, schema string) state.State {
	t.Helper()
	states, err := state.NewStore(db, "_enginemig_test").List(context.Background(), schema, "t")
	if err != nil || len(states) == 0 {
		t.Fatalf("no state recorded: %v", err)
	}
	return states[0]
}

func assertNoCaptureLeft(t *testing.T, db *sql.DB, schema string) {
	t.Helper()
	var n int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME LIKE '\\_emcap\\_%'", schema).Scan(&n)
	if n > 0 {
		t.Errorf("%d capture triggers left in %s", n, schema)
	}
	for _, name := range []string{"t_emchg", "t_emchb"} {
		if tableExists(t, db, schema, name) {
			t.Errorf("change log %s left behind", name)
		}
	}
}

// A trigger-capture run that dies leaves its triggers noting changes; cleanup removes them (before
// the shadow and the log) and the application's writes keep working.
func TestTriggerCaptureCleanupAfterCrash(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: "OFF"})
	schema, db := sandboxtest.FreshDatabase(t, s)
	tbl := dbconn.QualifiedName(schema, "t")
	sandboxtest.MustExec(t, db, "CREATE TABLE "+tbl+" (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO "+tbl+" SELECT seq, seq FROM seq_1_to_20000")
	opts := testOptions(s, schema, "t")
	hooks := faults.Hooks{CopyChunkTime: 2 * time.Millisecond} // many small copy chunks under the writers; verification at apply's chunk time
	hooks.CrashAfterRows = 5000
	if _, err := Run(withHooks(context.Background(), hooks), db, opts); !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("want a simulated crash, got %v", err)
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", schema).Scan(&n)
	if n != 3 || !tableExists(t, db, schema, "t_emchg") {
		t.Fatalf("after the crash: %d triggers, change log there %v; want the capture left in place", n, tableExists(t, db, schema, "t_emchg"))
	}
	res, err := cleanup.Run(context.Background(), db, cleanup.Options{Conn: connConfig(s), Schema: schema, Table: "t", StateSchema: opts.StateSchema})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup dropped %v", res.Dropped)
	assertNoCaptureLeft(t, db, schema)
	if tableExists(t, db, schema, "_t_new") {
		t.Error("shadow left")
	}
	sandboxtest.MustExec(t, db, "UPDATE "+tbl+" SET v = v + 1 WHERE id = 7", "INSERT INTO "+tbl+" VALUES (30001, 1)")
}

// A cut-over attempt holds trigger capture's periodic syncs (cutover.Target.Hold) from before it
// locks the tables: a sync that started under the attempt's lock would take the shadow's metadata
// lock (LOCK TABLES takes them in name order, `_t_new` before `t`) and wait for the source's, and
// the attempt's own sync, which writes the shadow, would wait for it until the periodic sync's
// lock wait (1 s) ends, with the application's writes waiting too. The attempt pauses under its
// lock long enough for a periodic sync to start; without the hold the lock is held past the pause
// for the whole of that wait instead of at most the catch-up budget.
func TestTriggerCaptureCutoverHoldsSyncs(t *testing.T) {
	schema, _ := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	ws := seedAllTypes(t, db, schema, 5000, 2, 5)
	stop := runWriters(ws, appPause)
	opts := testOptions(srv, schema, "t")
	opts.Capture = plan.CaptureTriggers
	opts.Cutover = cutover.DefaultConfig()
	opts.Cutover.Attempts = 1
	const pause = 300 * time.Millisecond // periodic syncs start every 200 ms
	hooks := faults.Hooks{OnLocked: func() { time.Sleep(pause) }}
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	time.Sleep(100 * time.Millisecond)
	stop()
	if err != nil {
		t.Fatalf("the cut-over's one attempt failed: %v", err)
	}
	for _, w := range ws {
		if len(w.failures) > 0 {
			t.Errorf("writer %d: %s", w.id, w.failures[0])
		}
	}
	if diff := sameRows(t, db, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
		t.Fatal(diff)
	}
	t.Logf("cut-over %+v", res.Cutover)
	if limit := pause + opts.Cutover.CatchUp; res.Cutover.LockHeld > limit {
		t.Fatalf("the cut-over held the table %s, more than its pause and catch-up budget (%s): a sync waited under its lock", res.Cutover.LockHeld, limit)
	}
}

// A rollback with trigger capture finds the writes made since the cut-over by comparing the
// tables chunk by chunk: updates made between apply and rollback, the same change to many rows of
// one length (a counter bumped by one), must all be in the MyISAM table afterwards. With the rows'
// hash CRC32, an even number of them in one chunk cancelled out and the chunk compared equal: 42
// updates lost in each run.
func TestTriggerRollbackKeepsEveryUpdateSinceTheCutover(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: "OFF"})
	schema, sdb := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, pad CHAR(40) NOT NULL) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, 0, LPAD(HEX(seq * 2654435761), 40, 'x') FROM "+sandboxtest.Seq(50000))
	db := openControl(t, s)
	opts := testOptions(s, schema, "t")
	if _, err := Run(context.Background(), db, opts); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, sdb, "UPDATE t SET v = v + 1 WHERE id % 97 = 0", "UPDATE t SET v = v + 1 WHERE id % 89 = 0")
	if _, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t",
		StateSchema: opts.StateSchema, Logger: opts.Logger}); err != nil {
		t.Fatal(err)
	}
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
		t.Fatalf("t is %s after the rollback", e)
	}
	var differ, lo, hi sql.NullInt64
	if err := sdb.QueryRow("SELECT COUNT(*), MIN(t.id), MAX(t.id) FROM t JOIN _t_new n USING (id) WHERE t.v <> n.v OR t.pad <> n.pad").Scan(&differ, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if differ.Int64 != 0 {
		t.Fatalf("after the rollback %d rows (ids %d..%d) lack the updates the InnoDB table got", differ.Int64, lo.Int64, hi.Int64)
	}
}
