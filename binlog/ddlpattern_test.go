package binlog

import "testing"

// DDL detection reads statement text, where a backtick inside a quoted name is doubled.
func TestDDLPatternQuotedNames(t *testing.T) {
	for _, c := range []struct {
		name, query string
		want        bool
	}{
		{"t", "TRUNCATE TABLE `db`.`t`", true},
		{"t", "ALTER TABLE t ADD COLUMN x INT", true},
		{"t", "RENAME TABLE `db`.`_t_old` TO `db`.`x`", false},
		{"t `2` order", "TRUNCATE TABLE `my db ``x`` é`.`t ``2`` order`", true},
		{"t `2` order", "ALTER TABLE `t ``2`` order` ADD COLUMN x INT", true},
		{"t `2` order", "DROP TABLE `_t ``2`` order_old`", false},
		{"sélect `x` order", "OPTIMIZE TABLE `sélect ``x`` order`", true},
		{"a`", "ALTER TABLE `a``` FORCE", true},
	} {
		if got := ddlPattern(c.name, nil).MatchString(c.query); got != c.want {
			t.Errorf("table %q, %s: matched %v, want %v", c.name, c.query, got, c.want)
		}
	}
}

// Trigger DDL is DDL on the table: CREATE TRIGGER names it, DROP TRIGGER only names the trigger.
func TestDDLPatternTriggers(t *testing.T) {
	re := ddlPattern("t", []string{"t_bi", "audit `x`"})
	for q, want := range map[string]bool{
		"CREATE DEFINER=`root`@`localhost` TRIGGER t_new BEFORE INSERT ON `db`.`t` FOR EACH ROW SET NEW.v = 1":       true,
		"CREATE TRIGGER x AFTER DELETE ON t FOR EACH ROW\nINSERT INTO a VALUES (OLD.id)":                             true,
		"CREATE DEFINER=`root`@`%` TRIGGER `db`.`_emtrg_0123` AFTER INSERT ON `db`.`_t_new` FOR EACH ROW SET @a = 1": false,
		"DROP TRIGGER `db`.`t_bi`":         true,
		"drop trigger if exists t_bi":      true,
		"DROP TRIGGER `audit ``x```":       true,
		"DROP TRIGGER `db`.`t_bi_other`":   false,
		"DROP TRIGGER `db`.`_emtrg_01234`": false,
		"CREATE TABLE tt (id INT)":         false,
	} {
		if got := re.MatchString(q); got != want {
			t.Errorf("%q: got %v, want %v", q, got, want)
		}
	}
}
