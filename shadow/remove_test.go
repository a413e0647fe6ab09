package shadow

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Remove drops only what a capture set up: where nothing was (a binlog-captured run), it writes
// nothing to the binlog, whose statements wait for space on a full disk (a failed run's clean-up
// hung so before the shadow's DROP that would have freed it). Where trigger capture was set up, it
// removes the triggers and the change log.
func TestRemoveWritesNothingWhereNothingWasSetUp(t *testing.T) {
	ctx := context.Background()
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=MyISAM",
		"CREATE TABLE tgt LIKE t", "ALTER TABLE tgt ENGINE=InnoDB")
	ti, err := table.Load(ctx, db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DB: db, Source: ti, Target: "tgt", ChangeLog: table.ChangeLogName("t", false)}
	before, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	after, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("removing nothing wrote to the binlog: %s -> %s", before, after)
	}

	cfg.Mode = Triggers
	if err := Install(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := Remove(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var triggers, logs int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", schema).Scan(&triggers); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, cfg.ChangeLog).Scan(&logs); err != nil {
		t.Fatal(err)
	}
	if triggers != 0 || logs != 0 {
		t.Errorf("after Remove: %d trigger(s) and %d change log(s) left", triggers, logs)
	}
}

// Trigger capture's set-up tries for a moment the source is free for as long as its caller allows
// (Config.LockWithin), without queuing: a transaction that keeps the table past that bound gets a
// refusal naming how long it was tried, and nothing installed; one that lets go within it gets
// the triggers.
func TestTriggerInstallTriesWithinItsBound(t *testing.T) {
	ctx := context.Background()
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=InnoDB",
		"INSERT INTO t VALUES (1, 'a')", "CREATE TABLE tgt LIKE t")
	ti, err := table.Load(ctx, db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DB: db, Source: ti, Target: "tgt", Mode: Triggers, ChangeLog: table.ChangeLogName("t", false)}
	// hold keeps t in an open transaction for d, as an application between its statements does.
	hold := func(d time.Duration) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "SELECT * FROM t"); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(d, func() { tx.Rollback() })
	}
	countTriggers := func() int {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	hold(4 * time.Second)
	cfg.LockWithin = time.Second
	err = Install(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "tried for") {
		t.Fatalf("held past its bound: want a refusal naming how long it tried, got %v", err)
	}
	if n := countTriggers(); n != 0 {
		t.Fatalf("a refused set-up left %d trigger(s)", n)
	}
	time.Sleep(4 * time.Second) // the first hold ends

	hold(3 * time.Second)
	cfg.LockWithin = 20 * time.Second
	if err := Install(ctx, cfg); err != nil {
		t.Fatalf("held for less than its bound: %v", err)
	}
	if n := countTriggers(); n != 3 {
		t.Fatalf("%d capture trigger(s) installed, want 3", n)
	}
	if err := Remove(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}
