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
		if got := ddlPattern(c.name).MatchString(c.query); got != c.want {
			t.Errorf("table %q, %s: matched %v, want %v", c.name, c.query, got, c.want)
		}
	}
}
