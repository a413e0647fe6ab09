package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/migration/state"
)

// longTrigger is 60 characters: with the table's name it is near MySQL's 64-character limit.
var longTrigger = "t_after_insert_" + strings.Repeat("x", 45)

// seedTriggers creates t (MyISAM, rows) with eight triggers: every timing × event, a second AFTER
// INSERT placed first with PRECEDES and a 60-character name, one named like an online-schema-change
// tool's own trigger, and one created under another sql_mode whose body depends on it (|| is
// CONCAT only with PIPES_AS_CONCAT). AFTER and BEFORE DELETE triggers log to audit (InnoDB), so
// every firing can be counted; BEFORE INSERT/UPDATE set w from v, so row content depends on them.
func seedTriggers(t *testing.T, db *sql.DB, schema string, rows int) {
	t.Helper()
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	stmts := []string{
		"CREATE TABLE " + q("t") + " (id INT PRIMARY KEY, v INT NOT NULL, w VARCHAR(40)) ENGINE=MyISAM",
		"CREATE TABLE " + q("audit") + " (n INT AUTO_INCREMENT PRIMARY KEY, trg VARCHAR(16), id INT) ENGINE=InnoDB",
		fmt.Sprintf("INSERT INTO %s SELECT seq, seq, CONCAT('seed:', seq) FROM seq_1_to_%d", q("t"), rows),
		"CREATE TRIGGER " + q("t_bi") + " BEFORE INSERT ON " + q("t") + " FOR EACH ROW SET NEW.w = CONCAT('bi:', NEW.v)",
		"CREATE TRIGGER " + q("t_ai") + " AFTER INSERT ON " + q("t") + " FOR EACH ROW INSERT INTO " + q("audit") + " (trg, id) VALUES ('ai', NEW.id)",
		"CREATE TRIGGER " + q(longTrigger) + " AFTER INSERT ON " + q("t") + " FOR EACH ROW PRECEDES `t_ai` INSERT INTO " + q("audit") + " (trg, id) VALUES ('ai2', NEW.id)",
		"CREATE TRIGGER " + q("t_au") + " AFTER UPDATE ON " + q("t") + " FOR EACH ROW INSERT INTO " + q("audit") + " (trg, id) VALUES ('au', NEW.id)",
		"CREATE TRIGGER " + q("t_bd") + " BEFORE DELETE ON " + q("t") + " FOR EACH ROW INSERT INTO " + q("audit") + " (trg, id) VALUES ('bd', OLD.id)",
		"CREATE TRIGGER " + q("pt_osc_"+schema[:min(len(schema), 20)]+"_t_del") + " AFTER DELETE ON " + q("t") + " FOR EACH ROW INSERT INTO " + q("audit") + " (trg, id) VALUES ('ad', OLD.id)",
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, s := range []string{"SET SESSION sql_mode = 'PIPES_AS_CONCAT'",
		"CREATE TRIGGER " + q("t_bu") + " BEFORE UPDATE ON " + q("t") + " FOR EACH ROW SET NEW.w = 'bu:' || NEW.v",
		"SET SESSION sql_mode = DEFAULT"} {
		if _, err := conn.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// trigWriter inserts, updates and deletes rows of its own id range and counts the statements that
// changed a row, so the expected number of firings of each trigger is known.
type trigWriter struct {
	db                        *sql.DB
	q                         string
	next, base                int64
	live                      []int64
	inserts, updates, deletes atomic.Int64
	failures                  []string
}

func (w *trigWriter) step(i int) {
	var res sql.Result
	var err error
	var count *atomic.Int64
	switch {
	case i%5 == 4 && len(w.live) > 0:
		id := w.live[0]
		w.live = w.live[1:]
		res, err = w.db.Exec("DELETE FROM "+w.q+" WHERE id = ?", id)
		count = &w.deletes
	case i%2 == 1 && len(w.live) > 0:
		res, err = w.db.Exec("UPDATE "+w.q+" SET v = v + 1 WHERE id = ?", w.live[i%len(w.live)])
		count = &w.updates
	default:
		w.next++
		res, err = w.db.Exec("INSERT INTO "+w.q+" (id, v) VALUES (?, ?)", w.base+w.next, i)
		w.live = append(w.live, w.base+w.next)
		count = &w.inserts
	}
	if err != nil {
		w.failures = append(w.failures, err.Error())
		return
	}
	if n, _ := res.RowsAffected(); n == 1 {
		count.Add(1)
	}
}

func startTrigWriters(db *sql.DB, schema string, n int) ([]*trigWriter, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ws []*trigWriter
	for i := 0; i < n; i++ {
		w := &trigWriter{db: db, q: dbconn.QualifiedName(schema, "t"), base: int64(1_000_000 * (i + 1))}
		ws = append(ws, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ctx.Err() == nil; j++ {
				w.step(j)
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	return ws, func() { cancel(); wg.Wait() }
}

// checkExactlyOnce compares every trigger's firings with the acknowledged statements.
func checkExactlyOnce(t *testing.T, db *sql.DB, schema string, ws []*trigWriter) {
	t.Helper()
	var ins, upd, del int64
	for _, w := range ws {
		if len(w.failures) > 0 {
			t.Errorf("application write failed: %s", w.failures[0])
		}
		ins, upd, del = ins+w.inserts.Load(), upd+w.updates.Load(), del+w.deletes.Load()
	}
	want := map[string]int64{"ai": ins, "ai2": ins, "au": upd, "bd": del, "ad": del}
	got := map[string]int64{}
	rows, err := db.Query("SELECT trg, COUNT(*) FROM " + dbconn.QualifiedName(schema, "audit") + " GROUP BY trg")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var trg string
		var n int64
		rows.Scan(&trg, &n)
		got[trg] = n
	}
	for trg, n := range want {
		if got[trg] != n {
			t.Errorf("trigger %s fired %d times for %d acknowledged statements", trg, got[trg], n)
		}
	}
	if ins+upd+del < 300 {
		t.Fatalf("only %d writes: the test did not exercise the triggers", ins+upd+del)
	}
	// The BEFORE triggers set w: every row written by the application carries their mark.
	var wrong int
	db.QueryRow("SELECT COUNT(*) FROM " + dbconn.QualifiedName(schema, "t") +
		" WHERE id > 1000000 AND NOT (w = CONCAT('bi:', v) OR w = CONCAT('bu:', v))").Scan(&wrong)
	if wrong > 0 {
		t.Errorf("%d rows without their BEFORE trigger's value", wrong)
	}
	t.Logf("%d inserts, %d updates, %d deletes, each fired its triggers once", ins, upd, del)
}

// checkTriggersOn asserts that want (the original definitions) are on schema.tbl under their own
// names and nothing else of enginemig's is left anywhere in the schema.
func checkTriggersOn(t *testing.T, db *sql.DB, schema, tbl string, want []table.Trigger) {
	t.Helper()
	got, err := table.LoadTriggers(context.Background(), db, schema, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if !table.SameTriggers(got, want) {
		t.Errorf("triggers on %s differ from the originals:\n got %+v\nwant %+v", tbl, names(got), names(want))
	}
	var strays int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND (TRIGGER_NAME LIKE '\\_emtrg\\_%' OR EVENT_OBJECT_TABLE <> ?)",
		schema, tbl).Scan(&strays)
	if strays > 0 {
		t.Errorf("%d stand-in or misplaced trigger(s) left in %s", strays, schema)
	}
}

func names(trs []table.Trigger) []string {
	var out []string
	for _, tr := range trs {
		out = append(out, fmt.Sprintf("%s %s %s #%d mode=%s", tr.Name, tr.Timing, tr.Event, tr.Order, tr.SQLMode))
	}
	return out
}

// Writers run through apply, a while on InnoDB, rollback, and a while on MyISAM again: every
// statement fires each of the table's triggers exactly once (enginemig's copy and replay fire
// none), and afterwards the same definitions are on the live table.
func TestTriggersCarriedAcrossApplyAndRollback(t *testing.T) {
	triggersCarried(t, srv)
}

// The same with trigger capture: the capture triggers come after the table's own of the same
// event, are never carried, and leave with the original (and, for the rollback, with the InnoDB
// table).
func TestTriggerCaptureWithTheTablesOwnTriggers(t *testing.T) {
	t.Parallel() // a server of its own (docs/testing.md, "Parallel tests")
	s := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: "OFF"})
	schema := triggersCarried(t, s)
	assertNoCaptureLeft(t, openControl(t, s), schema)
}

func triggersCarried(t *testing.T, srv *sandbox.Server) string {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	seedTriggers(t, sdb, schema, 20000)
	orig, err := table.LoadTriggers(context.Background(), db, schema, "t")
	if err != nil || len(orig) != 7 {
		t.Fatalf("seeded %d triggers (%v)", len(orig), err)
	}
	ws, stop := startTrigWriters(sdb, schema, 3)
	opts := testOptions(srv, schema, "t")
	hooks := faults.Hooks{CopyChunkTime: 2 * time.Millisecond} // many small copy chunks under the writers; verification at apply's chunk time
	// The first swap attempt dies after the stand-ins were installed: its connection is killed
	// while the rename waits, which must leave the original with all its triggers.
	var killed atomic.Bool
	opts.Cutover = fastCutover()
	hooks.OnRenameQueued = func(lockConn int64) {
		if killed.CompareAndSwap(false, true) {
			db.Exec(fmt.Sprintf("KILL %d", lockConn))
		}
	}
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if res.Cutover.Attempts < 2 || len(res.Triggers) != 7 {
		t.Errorf("cut-over attempts %d (want a killed one first), triggers carried %v", res.Cutover.Attempts, res.Triggers)
	}
	time.Sleep(300 * time.Millisecond)
	checkTriggersOn(t, db, schema, "t", orig)
	if _, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema,
		Logger: opts.Logger}); err != nil {
		stop()
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
		t.Fatalf("t is %s after rollback", e)
	}
	checkTriggersOn(t, db, schema, "t", orig)
	checkExactlyOnce(t, db, schema, ws)
	return schema
}

func fastCutover() cutover.Config {
	c := cutover.DefaultConfig()
	c.Backoff = 50 * time.Millisecond
	return c
}

// A process that dies in the trigger step, or just after the swap, leaves every trigger firing
// once (through its real self or its stand-in); running apply again gives them their names.
func TestTriggersResumeAfterCrashInTheSwapWindow(t *testing.T) {
	for _, c := range []struct {
		name    string
		stage   state.Stage
		trigger int
	}{
		{"after the swap", state.StageTriggers, 0},
		{"with a trigger and its stand-in both on the table", "", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema, sdb := sandboxtest.FreshDatabase(t, srv)
			db := openControl(t, srv)
			seedTriggers(t, sdb, schema, 5000)
			orig, _ := table.LoadTriggers(context.Background(), db, schema, "t")
			ws, stop := startTrigWriters(sdb, schema, 3)
			opts := testOptions(srv, schema, "t")
			crash := withHooks(context.Background(), faults.Hooks{CrashAtStage: string(c.stage), CrashAtTrigger: c.trigger})
			if _, err := Run(crash, db, opts); !errors.Is(err, errSimulatedCrash) {
				stop()
				t.Fatalf("want a simulated crash, got %v", err)
			}
			checkEachFiresOnce(t, db, schema, orig)
			time.Sleep(200 * time.Millisecond) // the application writes through the stand-ins
			if _, err := Run(context.Background(), db, opts); err != nil {
				stop()
				t.Fatalf("second run: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
			stop()
			checkTriggersOn(t, db, schema, "t", orig)
			checkExactlyOnce(t, db, schema, ws)
		})
	}
}

// checkEachFiresOnce asserts that every original trigger is on the live table itself or through
// its stand-in (the audit counts prove that, with both there, only one of them fires).
func checkEachFiresOnce(t *testing.T, db *sql.DB, schema string, orig []table.Trigger) {
	t.Helper()
	tableOf := func(trigger string) string {
		var on string
		db.QueryRow("SELECT EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME = ?", schema, trigger).Scan(&on)
		return on
	}
	for _, tr := range orig {
		onReal := tableOf(tr.Name)
		onTmp := tableOf(table.TempTriggerName(schema, "t", tr.Name))
		if onReal != "t" && onTmp != "t" {
			t.Errorf("trigger %s: real on %q, stand-in on %q: the live table is without it", tr.Name, onReal, onTmp)
		}
	}
}

// A trigger the application creates during the migration is DDL on the table: apply stops
// cleanly and the original keeps all its triggers.
func TestTriggerCreatedDuringMigrationStopsIt(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	seedTriggers(t, sdb, schema, 5000)
	opts := testOptions(srv, schema, "t")
	opts.Hook = func(ctx context.Context, at Point, _ *state.State) error {
		if at == After(state.StageCopy) {
			_, err := sdb.ExecContext(ctx, "CREATE TRIGGER "+dbconn.QualifiedName(schema, "t_late")+" AFTER UPDATE ON "+
				dbconn.QualifiedName(schema, "t")+" FOR EACH ROW SET @late = 1")
			return err
		}
		return nil
	}
	_, err := Run(context.Background(), db, opts)
	if outcome.CodeOf(err) != outcome.FailedSafe || !strings.Contains(err.Error(), "DDL") {
		t.Fatalf("want a clean stop for DDL, got %v", err)
	}
	trs, _ := table.LoadTriggers(context.Background(), db, schema, "t")
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" || len(trs) != 8 || tableExists(t, db, schema, "_t_new") {
		t.Fatalf("original not intact: %s with %d triggers, shadow left %v", e, len(trs), tableExists(t, db, schema, "_t_new"))
	}
}

// A dry run lists the trigger statements it would run and leaves the triggers where they are.
func TestTriggersDryRunReportsStatements(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	seedTriggers(t, sdb, schema, 2000)
	orig, _ := table.LoadTriggers(context.Background(), db, schema, "t")
	opts := testOptions(srv, schema, "t")
	opts.DryRun = true
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Per trigger: its stand-in, then drop, and under the live table's lock create with its own
	// name and drop the stand-in.
	if len(res.Triggers) != 6*len(orig) || !strings.Contains(res.Triggers[0], "_emtrg_") ||
		!strings.Contains(strings.Join(res.Triggers, "\n"), "TRIGGER "+dbconn.QualifiedName(schema, "t_bu")+" BEFORE UPDATE ON "+dbconn.QualifiedName(schema, "t")) {
		t.Fatalf("dry run reported %d trigger statements:\n%s", len(res.Triggers), strings.Join(res.Triggers, "\n"))
	}
	checkTriggersOn(t, db, schema, "t", orig)
}

// A rollback that dies with a trigger and its stand-in both on the MyISAM table leaves every
// trigger firing once; running the rollback again gives them their own names.
func TestTriggersRollbackResumesAfterCrash(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	seedTriggers(t, sdb, schema, 5000)
	orig, _ := table.LoadTriggers(context.Background(), db, schema, "t")
	ws, stop := startTrigWriters(sdb, schema, 3)
	opts := testOptions(srv, schema, "t")
	if _, err := Run(context.Background(), db, opts); err != nil {
		stop()
		t.Fatal(err)
	}
	rb := rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger}
	if _, err := rollback.Run(withHooks(context.Background(), faults.Hooks{CrashAtTrigger: 3}), db, rb); !errors.Is(err, errSimulatedCrash) {
		stop()
		t.Fatalf("want a simulated crash, got %v", err)
	}
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
		t.Fatalf("t is %s after the swap back", e)
	}
	checkEachFiresOnce(t, db, schema, orig)
	time.Sleep(200 * time.Millisecond)
	if _, err := rollback.Run(context.Background(), db, rb); err != nil {
		stop()
		t.Fatalf("second rollback: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	checkTriggersOn(t, db, schema, "t", orig)
	checkExactlyOnce(t, db, schema, ws)
	states, _ := state.NewStore(db, opts.StateSchema).List(context.Background(), schema, "t")
	if len(states) == 0 || states[0].Stage != state.StageRolledBack {
		t.Fatalf("state after the second rollback: %+v", states)
	}
}
