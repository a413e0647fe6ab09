package migration

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
)

// galeraKeyless: a table without a unique key (a non-unique index on an integer NOT NULL column,
// identical rows) converts on a Galera node under writers: copy chunks read under LOCK TABLES t
// READ and written after it, content-addressed replay, the Galera cut-over, while DDL in
// total-order isolation (on another table, and on the shadow) is ordered while chunks hold the
// source locked; every node then has the same rows with the row id, and rollback under the same
// writers gives node 1 back the MyISAM table. --keep-keyless is refused there.
func galeraKeyless(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	ws := seedKeyless(t, db, schema, keylessDDL, 3000, true, false)
	opts := testOptions(c.Nodes[0], schema, "t")
	opts.ChunkTime = 2 * time.Millisecond // many chunks: many changes on each side of a chunk's read

	opts.KeepKeyless = true
	if _, err := Run(context.Background(), db, opts); outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "--keep-keyless") {
		t.Fatalf("apply --keep-keyless of a keyless table on a Galera node: got code %d %v, want a refusal", outcome.CodeOf(err), err)
	}
	if engineOf(t, db, schema, "t") != "MyISAM" || tableExists(t, db, schema, "_t_new") {
		t.Fatal("a refused apply changed the table")
	}
	opts.KeepKeyless = false
	hooks := faults.Hooks{}
	ddls := galeraChunkDDL(t, db, schema, &hooks)

	run := func(what string, fn func() error) {
		t.Helper()
		stop := runKeyless(ws)
		err := fn()
		time.Sleep(200 * time.Millisecond) // writes after the swap must land in the new table
		stop()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var acked int64
		for _, w := range ws {
			acked += w.acked.Load()
			if len(w.failures) > 0 {
				t.Fatalf("%s: writer %d: %d failed writes, first: %s", what, w.id, len(w.failures), w.failures[0])
			}
		}
		if acked < 200 {
			t.Fatalf("%s: only %d writes acknowledged: the run was not under writers", what, acked)
		}
		sameMultiset(t, db, schema, "t", "ref")
	}
	run("apply", func() error {
		res, err := runBounded(withHooks(context.Background(), hooks), t, opts, c)
		ddls.check(t)
		if err == nil {
			t.Logf("apply: %d rows copied, %d changes replayed, verify %+v", res.RowsCopied, res.CaptureChanges, res.Verify)
			if res.Verify == nil || res.Verify.Repaired > 0 || res.CaptureChanges == 0 {
				t.Errorf("verify had to repair the shadow or nothing was replayed (%+v, %d changes): rule 5 lost or doubled changes", res.Verify, res.CaptureChanges)
			}
		}
		return err
	})
	galeraSame(t, c, schema, "t")
	for i, n := range c.Nodes {
		var withID, distinct, all int
		ndb := openControl(t, n)
		q := "SELECT COUNT(" + table.RowIDColumn + "), COUNT(DISTINCT " + table.RowIDColumn + "), COUNT(*) FROM " + dbconn.QualifiedName(schema, "t")
		if err := ndb.QueryRow(q).Scan(&withID, &distinct, &all); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		if withID == 0 || withID != distinct || withID != all {
			t.Errorf("node %d: row id on %d rows, %d distinct, of %d", i+1, withID, distinct, all)
		}
	}

	ropts := rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger, Cutover: cutover.DefaultConfig()}
	run("rollback", func() error {
		rres, err := rollbackBounded(context.Background(), t, db, ropts, c)
		if err == nil {
			t.Logf("rollback: %d changes replayed", rres.CaptureChanges)
		}
		return err
	})
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
		t.Fatalf("t is %s after the rollback", e)
	}
	for i, n := range c.Nodes {
		if err := sandboxtest.WaitSynced(context.Background(), openControl(t, n), len(c.Nodes)); err != nil {
			t.Fatalf("node %d after the rollback: %v", i+1, err)
		}
	}
}

// chunkDDL are statements in total-order isolation sent, one at a time, each while a copy chunk
// holds the source locked (faults.Hooks.ChunkLocked): a chunk that wrote the shadow under its
// lock would then wait for the statement while the statement waits for the lock (of the shadow),
// or for the chunk's commit ordered after it: a wedged node.
type chunkDDL struct {
	stmts []string
	sent  atomic.Int32
	busy  atomic.Bool
	done  chan ddlDone
}

type ddlDone struct {
	stmt string
	took time.Duration
	err  error
}

// galeraChunkDDL arms a run's hooks with the statements: an OPTIMIZE of another InnoDB table, a
// trigger created and dropped on it, and an OPTIMIZE of the shadow (a maintenance job's).
func galeraChunkDDL(t *testing.T, db *sql.DB, schema string, hooks *faults.Hooks) *chunkDDL {
	t.Helper()
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	sandboxtest.MustExec(t, db, "CREATE TABLE "+q("other")+" (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO "+q("other")+" VALUES (1, 1), (2, 2)")
	return armChunkDDL(db, hooks,
		"OPTIMIZE TABLE "+q("other"),
		"CREATE TRIGGER "+q("other_bi")+" BEFORE INSERT ON "+q("other")+" FOR EACH ROW SET NEW.v = NEW.v + 1",
		"DROP TRIGGER "+q("other_bi"),
		"OPTIMIZE TABLE "+q("_t_new"))
}

// armChunkDDL arms a run's hooks with stmts, each sent while a copy chunk holds the source locked.
func armChunkDDL(db *sql.DB, hooks *faults.Hooks, stmts ...string) *chunkDDL {
	d := &chunkDDL{stmts: stmts, done: make(chan ddlDone, len(stmts))}
	hooks.ChunkLocked = func() {
		i := int(d.sent.Load())
		if i >= len(d.stmts) || !d.busy.CompareAndSwap(false, true) {
			return
		}
		d.sent.Add(1)
		go func() {
			begin := time.Now()
			_, err := db.Exec(d.stmts[i])
			d.done <- ddlDone{d.stmts[i], time.Since(begin), err}
			d.busy.Store(false)
		}()
		time.Sleep(30 * time.Millisecond) // the statement is ordered while this chunk holds its lock
	}
	return d
}

// check fails unless every statement was sent during the copy and ended without an error, and
// returns the longest a statement took.
func (d *chunkDDL) check(t *testing.T) (longest time.Duration) {
	t.Helper()
	if n := int(d.sent.Load()); n < len(d.stmts) {
		t.Errorf("only %d of the %d DDL statements were sent while a copy chunk held the source: too few chunks", n, len(d.stmts))
	}
	for range d.sent.Load() {
		select {
		case e := <-d.done:
			if e.err != nil {
				t.Errorf("%s, sent while a chunk held the source: %v", e.stmt, e.err)
			} else {
				t.Logf("%.40s... sent while a chunk held the source: took %s", e.stmt, e.took.Round(time.Millisecond))
			}
			longest = max(longest, e.took)
		case <-time.After(10 * time.Second):
			t.Errorf("a DDL sent while a chunk held the source did not end within 10 s after apply")
			return longest
		}
	}
	return longest
}

// galeraKeylessDDLOnT: the application's DDL on t itself, ordered in total order while a copy
// chunk of a keyless t holds it (LOCK TABLES t READ), under writers. The DDL waits for the chunk's
// read, not longer, and nothing of the node waits for enginemig. OPTIMIZE TABLE t (a rebuild, which
// the binlog capture treats as a change of the table) stops the apply cleanly: exit 6, the
// shadow gone on every node, the original in place. ANALYZE TABLE t (statistics only) lets the
// next apply go on, and the conversion holds every acknowledged write of both runs.
func galeraKeylessDDLOnT(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	db.SetMaxOpenConns(30)
	l, err := ackload.Create(context.Background(), db, schema, "t", ackload.Config{Writers: 2, RowsPerWriter: 1000, Pause: 300 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	qt := dbconn.QualifiedName(schema, "t")
	sandboxtest.MustExec(t, db, "ALTER TABLE "+qt+" DROP PRIMARY KEY, ADD KEY id (id)") // a keyless table, walked by id
	stop := l.Start()
	defer stop()
	opts := testOptions(c.Nodes[0], schema, "t")
	opts.ChunkTime = 2 * time.Millisecond // many chunks

	hooks := faults.Hooks{}
	d := armChunkDDL(db, &hooks, "OPTIMIZE TABLE "+qt)
	_, err = runBounded(withHooks(context.Background(), hooks), t, opts, c)
	took := d.check(t)
	t.Logf("apply: %v", err)
	if outcome.CodeOf(err) != outcome.FailedSafe || !strings.Contains(err.Error(), "changed by DDL") {
		t.Fatalf("apply with OPTIMIZE TABLE t sent while a chunk held t: code %d, %v; want exit 6, the table changed", outcome.CodeOf(err), err)
	}
	if took > 5*time.Second {
		t.Errorf("OPTIMIZE TABLE t took %s while a chunk held t", took)
	}
	for i, n := range c.Nodes {
		ndb := openControl(t, n)
		for end := time.Now().Add(5 * time.Second); tableExists(t, ndb, schema, "_t_new"); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Errorf("node %d: the shadow is left after the failed apply", i+1)
				break
			}
		}
	}
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
		t.Fatalf("t is %s after the failed apply", e)
	}

	d = armChunkDDL(db, &hooks, "ANALYZE TABLE "+qt)
	res, err := runBounded(withHooks(context.Background(), hooks), t, opts, c)
	took = d.check(t)
	if err != nil {
		t.Fatalf("apply with ANALYZE TABLE t sent while a chunk held t: %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("ANALYZE TABLE t took %s while a chunk held t", took)
	}
	t.Logf("apply: %d rows copied, %d changes replayed, verify %+v", res.RowsCopied, res.CaptureChanges, res.Verify)
	checkAckedGalera(t, db, l, stop, schema)
	galeraSame(t, c, schema, "t")
}
