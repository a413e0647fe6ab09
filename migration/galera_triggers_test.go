package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/migration/state"
)

// galeraTriggerCapture: apply with trigger capture on node 1 under writers, on a table with
// triggers of its own. After the copy, statements in total-order isolation on the source
// (a trigger created and dropped again) and on the shadow (OPTIMIZE) are ordered while a sync
// holds the source: a sync that committed to the shadow with the source locked would wedge the
// node on the first; the second makes the sync's writes wait for it (or aborts them: error 1213,
// and they run again). Afterwards every
// node has the same InnoDB table, every acknowledged write is in it, the table's own triggers
// fired for each row written and are on the InnoDB table, and the cluster has 3 synced nodes.
func galeraTriggerCapture(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	db.SetMaxOpenConns(30)
	l, err := ackload.Create(context.Background(), db, schema, "t", ackload.Config{Writers: 3, RowsPerWriter: 2000, Pause: 300 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	galeraTagTriggers(t, db, schema)
	// A TIMESTAMP column, and sessions outside UTC: a sync reads rows in UTC, and verification
	// compares the source in the session that synced with the shadow in another.
	var zone string
	db.QueryRow("SELECT @@GLOBAL.time_zone").Scan(&zone)
	sandboxtest.MustExec(t, db, "ALTER TABLE "+q("t")+" ADD COLUMN ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP",
		"SET GLOBAL time_zone = '+05:00'")
	defer db.Exec("SET GLOBAL time_zone = " + dbconn.QuoteString(zone))
	stop := l.Start()
	defer stop()
	time.Sleep(200 * time.Millisecond)
	opts := testOptions(c.Nodes[0], schema, "t")
	opts.Capture = "triggers"
	// While a sync holds the source locked, once each: a CREATE TRIGGER on the source, ordered in
	// total order then, which waits for that lock (and is dropped again once it returned; the
	// cut-over must then find the table's triggers as they were at the start); and an OPTIMIZE of
	// the shadow, in total order while the sync's writes run, which fail certification (error
	// 1213) and must run again, and which wedged the node when the sync held the shadow too.
	ddls := []string{
		"CREATE TRIGGER " + q("t_probe") + " BEFORE DELETE ON " + q("t") + " FOR EACH ROW SET @enginemig_test_probe = 1",
		"OPTIMIZE TABLE " + q("_t_new"),
	}
	probes := func() int {
		var n int
		db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME = 't_probe'", schema).Scan(&n)
		return n
	}
	var armed atomic.Int32 // 1 + the index of the DDL to send, 0: none
	ddlDone := make(chan error, 1)
	hooks := faults.Hooks{}
	hooks.SyncLocked = func() {
		n := armed.Swap(0)
		if n == 0 {
			return
		}
		go func() {
			begin := time.Now()
			_, err := db.Exec(ddls[n-1])
			t.Logf("%.20s... sent while a sync held t: took %s", ddls[n-1], time.Since(begin).Round(time.Millisecond))
			ddlDone <- err
		}()
		time.Sleep(30 * time.Millisecond)
	}
	opts.Hook = func(_ context.Context, at Point, _ *state.State) error {
		if at != After(state.StageCopy) {
			return nil
		}
		for i := range ddls {
			armed.Store(int32(i + 1))
			select {
			case err := <-ddlDone:
				if err != nil {
					return err
				}
			case <-time.After(20 * time.Second):
				return errors.New("no sync of the capture's own came within 20 s")
			}
			if i == 0 {
				if _, err := db.Exec("DROP TRIGGER " + q("t_probe")); err != nil {
					return err
				}
				// information_schema on node 1 has shown t_probe after its DROP had returned: for
				// a moment (1 run in 16 with one core busy), and once for more than 5 s, when a
				// second DROP found no such trigger (1 run in 9; 0 in 20 after the pending writes'
				// fix). Wait for it to go; past 5 s, flush t (what a DBA would do) and say so: the
				// listing is the server's, and what this test is about comes after it.
				dropped := time.Now()
				for probes() != 0 && time.Since(dropped) < 5*time.Second {
					time.Sleep(50 * time.Millisecond)
				}
				if n := probes(); n != 0 {
					_, again := db.Exec("DROP TRIGGER " + q("t_probe"))
					_, flushed := db.Exec("FLUSH TABLES " + q("t"))
					t.Logf("t_probe still listed on node 1 5 s after its DROP returned (%d); a second DROP: %v; FLUSH TABLES t: %v; listed after it: %d", n, again, flushed, probes())
					if probes() != 0 {
						return fmt.Errorf("t_probe still on node 1 5 s after its DROP returned, and after FLUSH TABLES t (%d); a second DROP: %v", n, again)
					}
				}
				if waited := time.Since(dropped); waited > 50*time.Millisecond {
					t.Logf("t_probe left node 1's information_schema %s after its DROP returned", waited.Round(time.Millisecond))
				}
			}
		}
		return nil
	}
	res, err := runBounded(withHooks(context.Background(), hooks), t, opts, c)
	if err != nil {
		t.Logf("t_probe on node 1 now: %d", probes())
		for i, n := range c.Nodes {
			t.Logf("node %d:\n%s", i+1, n.ErrorLogTail(15))
		}
		t.Fatalf("apply with trigger capture: code %d, %v", outcome.CodeOf(err), err)
	}
	t.Logf("apply: %d rows copied in %s, %d changes captured, cut-over %d attempt(s), lock held %s, total %s", res.RowsCopied, res.CopyTime.Round(time.Millisecond),
		res.CaptureChanges, res.Cutover.Attempts, res.Cutover.LockHeld.Round(time.Millisecond), res.TotalTime.Round(time.Millisecond))
	checkAckedGalera(t, db, l, stop, schema)
	galeraSame(t, c, schema, "t")
	galeraFired(t, db, schema)
	for _, n := range []string{"t_emchg", "_t_new"} {
		if tableExists(t, db, schema, n) {
			t.Errorf("%s left behind", n)
		}
	}
	var capture int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME LIKE '\\_emcap\\_%'", schema).Scan(&capture)
	if capture != 0 {
		t.Errorf("%d capture trigger(s) left behind", capture)
	}
}

// checkAckedGalera is checkAcked for a table a DDL in total-order isolation touched while the
// application wrote it: the cluster aborts statements that hold the table's locks then (error
// 1213, nothing of them stays), which an application runs again. Any other error fails the test.
func checkAckedGalera(t *testing.T, db *sql.DB, l *ackload.Load, stop func(), schema string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	stop()
	st := l.Stats()
	// A statement the cluster aborts for a DDL on t may still have changed the MyISAM t, which
	// cannot roll back. The writer sees 1213 and counts its rows as uncertain, and a later
	// statement that meets such a row (a duplicate key, 1062) is the abort's fallout. Or, under
	// wsrep_retry_autocommit (1 by default), the server runs the aborted statement again itself,
	// and the writer sees only the retry's 1062 on the row the first run left: no 1213 before it.
	// Either is the documented effect of a DDL on t during this conversion, not a problem.
	aborted, fallout := 0, 0
	for _, p := range l.Problems(1 << 20) {
		switch {
		case strings.Contains(p, "Error 1213"):
			aborted++
		case strings.Contains(p, "Error 1062"):
			fallout++
			t.Logf("fallout of an abort: %s", p)
		default:
			t.Errorf("application problem: %s", p)
		}
	}
	checked, diffs, err := l.Check(context.Background(), db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("lost or wrong writes:\n%s", strings.Join(diffs, "\n"))
	}
	t.Logf("%d writes and %d reads acknowledged, %d aborted by the cluster (1213), %d duplicate keys (their fallout), %d rows identical", st.Acked, st.Reads, aborted, fallout, checked)
}

// galeraFired checks the table's own triggers are on it and fired on every row written since they
// were created (each inserted row, and each one updated, has its tag), and nowhere else.
func galeraFired(t *testing.T, db *sql.DB, schema string) {
	t.Helper()
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	var untagged, wrong, tagged int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + q("t") + " WHERE tag IS NULL AND id NOT IN (SELECT id FROM " + q("seeded") + ")").Scan(&untagged); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM " + q("t") + " WHERE tag <> id * 2").Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	db.QueryRow("SELECT COUNT(*) FROM " + q("t") + " WHERE tag IS NOT NULL").Scan(&tagged)
	if untagged > 0 || wrong > 0 || tagged == 0 {
		t.Errorf("the table's own triggers: %d rows written without their firing, %d with a wrong tag, %d tagged", untagged, wrong, tagged)
	}
	var names string
	db.QueryRow("SELECT COALESCE(GROUP_CONCAT(TRIGGER_NAME ORDER BY TRIGGER_NAME), '') FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = 't'", schema).Scan(&names)
	if names != "t_bi,t_bu" {
		t.Errorf("triggers on t after apply: %q, want t_bi,t_bu", names)
	}
	t.Logf("the table's own triggers tagged %d rows, every one written since they were created", tagged)
}

// galeraTagTriggers gives t triggers of its own that set a column of their own (ackload's writes
// leave it alone). They write no other table: a write to the MyISAM table that also wrote InnoDB
// would be replicated whole, and the other nodes, whose MyISAM table lacks the row, would leave
// the cluster. seeded keeps the ids the triggers have not seen written.
func galeraTagTriggers(t *testing.T, db *sql.DB, schema string) {
	t.Helper()
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	sandboxtest.MustExec(t, db,
		"ALTER TABLE "+q("t")+" ADD COLUMN tag BIGINT NULL",
		"CREATE TABLE "+q("seeded")+" (id BIGINT PRIMARY KEY) ENGINE=MyISAM",
		"INSERT INTO "+q("seeded")+" SELECT id FROM "+q("t"),
		"CREATE TRIGGER "+q("t_bi")+" BEFORE INSERT ON "+q("t")+" FOR EACH ROW SET NEW.tag = NEW.id * 2",
		"CREATE TRIGGER "+q("t_bu")+" BEFORE UPDATE ON "+q("t")+" FOR EACH ROW SET NEW.tag = NEW.id * 2")
}

// galeraRollbackTriggers: apply (binlog capture) of a table with triggers of its own under
// writers on node 1, rows inserted on node 2 into the InnoDB table, then rollback under the
// writers: the triggers go back with the gated swap. Node 1's MyISAM t then holds every
// acknowledged write and node 2's rows, each written row with its trigger's tag, the triggers
// are on it under their own names with no stand-in left, and the cluster has 3 synced nodes.
func galeraRollbackTriggers(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	db.SetMaxOpenConns(30)
	const others = 900_000_000
	l, err := ackload.Create(context.Background(), db, schema, "t", ackload.Config{Writers: 3, RowsPerWriter: 1000, Pause: 300 * time.Microsecond, OthersFrom: others})
	if err != nil {
		t.Fatal(err)
	}
	galeraTagTriggers(t, db, schema)
	stop := l.Start()
	defer stop()
	opts := testOptions(c.Nodes[0], schema, "t")
	if _, err := runBounded(context.Background(), t, opts, c); err != nil {
		t.Fatalf("apply: %v", err)
	}
	db2 := openControl(t, c.Nodes[1])
	for end := time.Now().Add(10 * time.Second); engineOf(t, db2, schema, "t") != "InnoDB"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("node 2: t is not InnoDB 10 s after apply")
		}
	}
	for i := 0; i < 20; i++ {
		sandboxtest.MustExec(t, db2, fmt.Sprintf("INSERT INTO `%s`.t (id, v) VALUES (%d, %d)", schema, others+i, i))
	}
	ropts := rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger, Cutover: cutover.DefaultConfig()}
	res, err := rollbackBounded(context.Background(), t, db, ropts, c)
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	t.Logf("rollback: %d changes replayed, %d attempt(s), rename held at the gate %s, total %s", res.CaptureChanges, res.Cutover.Attempts,
		res.Cutover.LockHeld.Round(time.Millisecond), res.TotalTime.Round(time.Millisecond))
	// After the swap back each trigger gets its own name on the MyISAM t again: DDL in total-order
	// isolation while the application writes t, whose fallout (1213; a duplicate key from the
	// server's own retry of an aborted INSERT, whose first run MyISAM kept) checkAckedGalera
	// counts, as for apply's DDL. The runbook lists it as a known defect.
	checkAckedGalera(t, db, l, stop, schema)
	if st := l.Stats(); st.Stale > 0 {
		t.Errorf("%d stale reads", st.Stale)
	}
	checkSwappedBack(t, c, schema, "the rollback")
	var fromNode2 int
	db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM `%s`.t WHERE id >= %d AND tag = id * 2", schema, others)).Scan(&fromNode2)
	if fromNode2 != 20 {
		t.Errorf("node 1's MyISAM t has %d of the 20 rows written on node 2 (with their tags)", fromNode2)
	}
	galeraFired(t, db, schema)
	var standIns int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME LIKE '\\_emtrg\\_%'", schema).Scan(&standIns)
	if standIns != 0 {
		t.Errorf("%d stand-in trigger(s) left", standIns)
	}
}
