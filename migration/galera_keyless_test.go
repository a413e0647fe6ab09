package migration

import (
	"context"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/rollback"
	"github.com/enginemig/enginemig/sandbox/sandboxtest"
	"github.com/enginemig/enginemig/table"
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
	ws := seedKeyless(t, db, schema, keylessDDL, 3000, true)
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
	ddls := galeraChunkDDL(t, db, schema, &opts)

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
		res, err := runWithin(t, db, opts, c, time.Minute)
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
		rres, err := rollbackBounded(t, db, ropts, c)
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
// holds the source locked (faults.Faults.ChunkLocked): a chunk that wrote the shadow under its
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

// galeraChunkDDL arms opts with the statements: an OPTIMIZE of another InnoDB table, a trigger
// created and dropped on it, and an OPTIMIZE of the shadow (a maintenance job's).
func galeraChunkDDL(t *testing.T, db *sql.DB, schema string, opts *Options) *chunkDDL {
	t.Helper()
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	sandboxtest.MustExec(t, db, "CREATE TABLE "+q("other")+" (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO "+q("other")+" VALUES (1, 1), (2, 2)")
	d := &chunkDDL{stmts: []string{
		"OPTIMIZE TABLE " + q("other"),
		"CREATE TRIGGER " + q("other_bi") + " BEFORE INSERT ON " + q("other") + " FOR EACH ROW SET NEW.v = NEW.v + 1",
		"DROP TRIGGER " + q("other_bi"),
		"OPTIMIZE TABLE " + q("_t_new"),
	}}
	d.done = make(chan ddlDone, len(d.stmts))
	opts.seams.ChunkLocked = func() {
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

// check fails unless every statement was sent during the copy and ended without an error.
func (d *chunkDDL) check(t *testing.T) {
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
		case <-time.After(10 * time.Second):
			t.Errorf("a DDL sent while a chunk held the source did not end within 10 s after apply")
			return
		}
	}
}
