package migration

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/migration/state"
)

// toPreviousLayout turns the state table back into the layout the previous version wrote: binlog
// positions as file and offset columns, the change count as events_applied.
func toPreviousLayout(t *testing.T, db *sql.DB, s *state.Store) {
	t.Helper()
	var cols, fill []string
	for _, p := range []struct{ old, now string }{{"binlog_start", "capture_start"}, {"binlog_cutover", "capture_cutover"}, {"binlog_applied", "capture_resume"}} {
		cols = append(cols, "ADD COLUMN "+p.old+"_file VARCHAR(255) NOT NULL DEFAULT ''", "ADD COLUMN "+p.old+"_pos BIGINT UNSIGNED NOT NULL DEFAULT 0")
		fill = append(fill, p.old+"_file = SUBSTRING_INDEX("+p.now+", ':', 1)", p.old+"_pos = IF("+p.now+" = '', 0, SUBSTRING_INDEX("+p.now+", ':', -1))")
	}
	sandboxtest.MustExec(t, db, "ALTER TABLE "+s.Name()+" "+strings.Join(cols, ", ")+", CHANGE COLUMN capture_changes events_applied BIGINT NOT NULL DEFAULT 0",
		"UPDATE "+s.Name()+" SET "+strings.Join(fill, ", "),
		"ALTER TABLE "+s.Name()+" DROP COLUMN capture_start, DROP COLUMN capture_cutover, DROP COLUMN capture_resume")
	has, err := s.Columns(context.Background())
	if err != nil || has["capture_resume"] || !has["binlog_applied_file"] || !has["events_applied"] {
		t.Fatalf("not the previous layout: %v %v", has, err)
	}
}

// A migration interrupted under the previous version, whose state table has binlog_* columns,
// is resumed from that table (not started over): the table is upgraded in place, its positions
// read as the capture's own.
func TestResumeFromThePreviousVersionsStateTable(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(40000))
	opts := testOptions(srv, schema, "t")
	opts.StateSchema = "_state_prev_resume"
	t.Cleanup(func() { db.Exec("DROP DATABASE " + opts.StateSchema) })
	hooks := faults.Hooks{IdleChunkTime: time.Millisecond}
	opts.ChunkTime = time.Millisecond
	opts.ProgressEvery, hooks.SaveEvery = 50*time.Millisecond, 50*time.Millisecond
	hooks.CrashAfterRows = 10000
	if _, err := Run(withHooks(context.Background(), hooks), db, opts); !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("want simulated crash, got %v", err)
	}
	store := state.NewStore(db, opts.StateSchema)
	before, err := store.List(context.Background(), schema, "t")
	if err != nil || len(before) != 1 || before[0].CaptureResume == "" {
		t.Fatalf("the crashed run recorded no resume position: %+v %v", before, err)
	}
	toPreviousLayout(t, db, store)
	old, err := state.NewStore(db, opts.StateSchema).List(context.Background(), schema, "t")
	if err != nil || len(old) != 1 || old[0].CaptureResume != before[0].CaptureResume || old[0].CaptureStart != before[0].CaptureStart ||
		old[0].CaptureChanges != before[0].CaptureChanges {
		t.Fatalf("reading the previous layout: %v\n got %+v\nwant %+v", err, old, before)
	}
	sandboxtest.MustExec(t, sdb, "UPDATE t SET v = v + 1 WHERE id % 7 = 0", "DELETE FROM t WHERE id % 11 = 0")
	var logs logLines
	hooks.CrashAfterRows, opts.Logger = 0, logs.logger()
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "resuming migration") || res.RowsCopied >= 40000 {
		t.Fatalf("did not resume from the previous version's record (copied %d); log %v", res.RowsCopied, logs.String())
	}
	if has, _ := store.Columns(context.Background()); has["binlog_applied_file"] || !has["capture_resume"] {
		t.Fatalf("state table not upgraded: %v", has)
	}
	if diff := sameRows(t, db, schema, "t", "_t_old", []string{"id", "v"}, "id"); diff != "" {
		t.Fatal(diff)
	}
}

// A conversion recorded by the previous version is rolled back from its binlog_cutover columns.
func TestRollbackFromThePreviousVersionsStateTable(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(1000))
	opts := testOptions(srv, schema, "t")
	opts.StateSchema = "_state_prev_rollback"
	t.Cleanup(func() { db.Exec("DROP DATABASE " + opts.StateSchema) })
	if _, err := Run(context.Background(), db, opts); err != nil {
		t.Fatal(err)
	}
	toPreviousLayout(t, db, state.NewStore(db, opts.StateSchema))
	sandboxtest.MustExec(t, sdb, "UPDATE t SET v = v + 1 WHERE id % 3 = 0", "INSERT INTO t VALUES (5000, 5000)")
	res, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema})
	if err != nil {
		t.Fatal(err)
	}
	if res.CaptureChanges == 0 || engineOf(t, db, schema, "t") != "MyISAM" {
		t.Fatalf("rollback did not replay from the recorded cut-over: %+v", res)
	}
	st, err := state.NewStore(db, opts.StateSchema).List(context.Background(), schema, "t")
	if err != nil || st[0].Stage != state.StageRolledBack {
		t.Fatalf("rollback not recorded: %+v %v", st, err)
	}
	if diff := sameRows(t, db, schema, "t", "_t_new", []string{"id", "v"}, "id"); diff != "" {
		t.Fatal(diff)
	}
}
