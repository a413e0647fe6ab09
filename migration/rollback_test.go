package migration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
)

// Convert under load, keep writing to the InnoDB table, roll back while writers still run: the
// MyISAM table that comes back must hold every acknowledged write.
func TestRollbackKeepsWritesMadeAfterCutover(t *testing.T) {
	schema, _ := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	ws := seedAllTypes(t, db, schema, 5000, 3, 7)
	stop := runWriters(ws, appPause)
	opts := testOptions(srv, schema, "t")
	if _, err := Run(context.Background(), db, opts); err != nil {
		stop()
		t.Fatal(err)
	}
	var before int64
	for _, w := range ws {
		before += w.acked.Load()
	}
	time.Sleep(time.Second) // writes that only the InnoDB table receives
	res, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger})
	time.Sleep(300 * time.Millisecond) // and writes after the swap back, to the MyISAM table
	stop()
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	var after int64
	for _, w := range ws {
		after += w.acked.Load()
		if len(w.failures) > 0 {
			t.Errorf("writer %d: %v", w.id, w.failures[0])
		}
	}
	t.Logf("writes: %d before the end of the migration, %d in total; rollback replayed %d changes", before, after, res.CaptureChanges)
	if res.CaptureChanges == 0 || after-before < 50 {
		t.Fatalf("not enough writes after the cut-over to prove anything (%d replayed, %d written)", res.CaptureChanges, after-before)
	}
	if engineOf(t, db, schema, "t") != "MyISAM" || engineOf(t, db, schema, "_t_new") != "InnoDB" || tableExists(t, db, schema, "_t_old") {
		t.Fatal("tables not swapped back")
	}
	if diff := sameRows(t, db, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
		t.Fatalf("rolled-back table differs: %s", diff)
	}
	if diff := sameRows(t, db, schema, "ref", "t", allTypesColumns, "id"); diff != "" {
		t.Fatalf("rolled-back table differs: %s", diff)
	}
	_, err = rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema})
	if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "already rolled back") {
		t.Fatalf("second rollback: %v", err)
	}
}

func TestRollbackRefusesWhenBinlogPurged(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	if _, err := sdb.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM"); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, sdb, "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(100))
	opts := testOptions(srv, schema, "t")
	opts.StateSchema = "_state_purge"
	if _, err := Run(context.Background(), db, opts); err != nil {
		t.Fatal(err)
	}
	purgeBinlogs(t, db)
	_, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema})
	if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "purged") {
		t.Fatalf("got %d %v", outcome.CodeOf(err), err)
	}
	if engineOf(t, db, schema, "t") != "InnoDB" || engineOf(t, db, schema, "_t_old") != "MyISAM" || tableExists(t, db, schema, "_t_new") {
		t.Fatal("refused rollback changed tables")
	}
}
