package rollback

import (
	"testing"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/table"
)

// The rollback's binlog stream starts at the position read under the cut-over's lock, just
// before the migration's own swap: those renames must be stepped over, in every form the
// cut-over writes them (sentry swap, sentry to kept name, Galera's direct and gated swaps), and
// with the names spelled as the statement spells them. Any other rename is DDL the capture must
// see.
func TestIsCutoverRename(t *testing.T) {
	swaps := func(name string) []string {
		old, shadow, swap := table.OldName(name), table.ShadowName(name), table.SwapName(name)
		return []string{
			table.RenameTables("d", [2]string{name, swap}, [2]string{shadow, name}),
			table.RenameTable("d", swap, old),
			table.RenameTables("d", [2]string{name, old}, [2]string{shadow, name}),
			table.RenameTables("d", [2]string{table.GateName(name), table.GoneName(name)}, [2]string{name, old}, [2]string{shadow, name}),
		}
	}
	for _, name := range []string{"t", "Orders", "we`ird"} {
		is := isCutoverRename(name)
		for _, q := range swaps(name) {
			if !is(q) {
				t.Errorf("table %s: the cut-over's own %q is not recognised", name, q)
			}
		}
	}
	is := isCutoverRename("t")
	for _, q := range append(swaps("u"),
		table.RenameTable("d", "t", "t_archive"),
		"ALTER TABLE `d`.`_t_old` ADD COLUMN w INT",
	) {
		if is(q) {
			t.Errorf("table t: %q taken for its cut-over's rename", q)
		}
	}
}

// The stream also steps over trigger DDL (the apply's own trigger statements after its swap, and
// the check under the lock catches any other change): CREATE and DROP TRIGGER as the server logs
// them, whatever their case, definer or leading comment; nothing else.
func TestIsTriggerDDL(t *testing.T) {
	for _, q := range []string{
		"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.v = 1",
		"CREATE DEFINER=`root`@`localhost` TRIGGER `tr` AFTER UPDATE ON `t` FOR EACH ROW SET @n = 1",
		"create or replace\n  definer=`app`@`%`\n  trigger tr after delete on t for each row set @n = 1",
		"/* enginemig */ DROP TRIGGER IF EXISTS `d`.`tr`",
		"  " + table.DropTrigger("d", "tr"),
	} {
		if !isTriggerDDL(q) {
			t.Errorf("%q is trigger DDL", q)
		}
	}
	for _, q := range []string{
		"CREATE TABLE t_triggers (id INT)",
		"DROP TABLE `trigger_log`",
		"INSERT INTO t VALUES ('CREATE TRIGGER x')",
		"ALTER TABLE t COMMENT 'DROP TRIGGER tr'",
		table.RenameTable("d", "t", "t2"),
	} {
		if isTriggerDDL(q) {
			t.Errorf("%q is not trigger DDL", q)
		}
	}
}

// Options left at their zero values get a logger, the default cut-over settings (with that
// logger) and a replica server id of their own, away from the low ids servers are given.
func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.Logger == nil || o.Cutover.Logger != o.Logger || o.Cutover.LockWait != cutover.DefaultConfig().LockWait {
		t.Errorf("defaults: logger %v, cut-over %+v", o.Logger, o.Cutover)
	}
	if o.ServerID < 1<<30 || o.ServerID >= 1<<31 {
		t.Errorf("server id %d, want one in [2^30, 2^31)", o.ServerID)
	}
	set := Options{ServerID: 7, Cutover: cutover.Config{LockWait: 3}}.withDefaults()
	if set.ServerID != 7 || set.Cutover.LockWait != 3 {
		t.Errorf("set options were replaced: server id %d, lock wait %v", set.ServerID, set.Cutover.LockWait)
	}
	if orNone("") != "(none)" || orNone("f.000001:4") != "f.000001:4" {
		t.Errorf("orNone")
	}
}
