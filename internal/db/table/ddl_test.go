package table

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

func TestRunDDL(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{DropTable("d", "_t_new"), "DROP TABLE `d`.`_t_new`"},
		{DropTableIfExists("d", "_t_new"), "DROP TABLE IF EXISTS `d`.`_t_new`"},
		{RenameTable("d", "t_emswap", "_t_old"), "RENAME TABLE `d`.`t_emswap` TO `d`.`_t_old`"},
		{RenameTables("d", [2]string{"#t_gate", "#t_gone"}, [2]string{"t", "_t_new"}, [2]string{"_t_old", "t"}),
			"RENAME TABLE `d`.`#t_gate` TO `d`.`#t_gone`, `d`.`t` TO `d`.`_t_new`, `d`.`_t_old` TO `d`.`t`"},
		{DropIndexes("d", "_t_new", []string{"u", "b`q"}), "ALTER TABLE `d`.`_t_new` DROP INDEX `u`, DROP INDEX `b``q`"},
		{DropTrigger("d", "tr"), "DROP TRIGGER `d`.`tr`"},
		{ShowCreateTrigger("d", "tr"), "SHOW CREATE TRIGGER `d`.`tr`"},
		{LockWrite("d", "t"), "LOCK TABLES `d`.`t` WRITE"},
		{DropTable("we`ird", "na`me"), "DROP TABLE `we``ird`.`na``me`"},
		{KillConnection(42), "KILL 42"},
		{KillQuery(42), "KILL QUERY 42"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

// The statements above run as written, and TriggerNames and TriggerExists find a trigger where
// they leave it.
func TestRunDDLOnAServer(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	ctx := context.Background()
	sandboxtest.MustExec(t, db, "CREATE TABLE t_emswap (id INT PRIMARY KEY, u INT, UNIQUE KEY u (u)) ENGINE=MyISAM",
		"CREATE TRIGGER tr AFTER INSERT ON t_emswap FOR EACH ROW SET @x = 1")
	on := func(tbl string, want ...string) {
		t.Helper()
		if got, err := TriggerNames(ctx, db, schema, tbl); err != nil || !slices.Equal(got, want) {
			t.Fatalf("triggers on %s: %q %v, want %q", tbl, got, err, want)
		}
	}
	exists := func(want bool) {
		t.Helper()
		if got, err := TriggerExists(ctx, db, schema, "tr"); err != nil || got != want {
			t.Fatalf("TriggerExists: %v %v, want %v", got, err, want)
		}
	}
	on("t_emswap", "tr")
	exists(true)
	sandboxtest.MustExec(t, db, RenameTable(schema, "t_emswap", "_t_old"), DropIndexes(schema, "_t_old", []string{"u"}))
	on("_t_old", "tr")
	on("t_emswap")
	exists(true)
	sandboxtest.MustExec(t, db, DropTrigger(schema, "tr"))
	on("_t_old")
	exists(false)
	ti, err := Load(ctx, db, schema, "_t_old")
	if err != nil || len(ti.Indexes) != 1 {
		t.Fatalf("after DropIndexes: %+v %v", ti, err)
	}
	sandboxtest.MustExec(t, db, DropTable(schema, "_t_old"), DropTableIfExists(schema, "_t_old"))
	if _, err := Load(ctx, db, schema, "_t_old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after DropTable: %v", err)
	}
}
