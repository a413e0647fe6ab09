package shadow

import (
	"context"
	"testing"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox/sandboxtest"
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
