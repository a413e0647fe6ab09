package migration

import (
	"context"
	"strings"
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
// identical rows) converts on a Galera node under writers: copy chunks under LOCK TABLES on the
// InnoDB shadow, content-addressed replay, the Galera cut-over; every node then has the same rows
// with the row id, and rollback under the same writers gives node 1 back the MyISAM table.
// --keep-keyless is refused there.
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
		res, err := runBounded(t, db, opts, c)
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
