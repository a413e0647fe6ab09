package workload

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestNormalizeMatchesDigestText(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"SELECT * FROM p WHERE id = 5", "SELECT * FROM p WHERE id = ?"},
		{"select id from p where id in (1, 2,3) limit 10;", "select id from p where id in ( ... ) limit ?"},
		{"INSERT INTO p (a, b) VALUES (1, 'x'), (2, 'it''s')", "INSERT INTO p ( a , b ) VALUES ( ... )"},
		{"UPDATE p SET c = c + 1 WHERE id = -7 /* app */", "UPDATE p SET c = c + ? WHERE id = - ?"},
		{"SELECT SUM(coins) FROM `d`.`p` WHERE name = \"a\\\"b\" AND x BETWEEN 1.5e3 AND 2", "SELECT SUM ( coins ) FROM `d` . `p` WHERE name = ? AND x BETWEEN ? AND ?"},
	} {
		if got, _, _ := Normalize(tc.sql); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
	_, lits, lists := Normalize("SELECT a FROM p WHERE id IN (4,5,6) AND b > 3 LIMIT 7")
	if !reflect.DeepEqual(lits, []string{"3", "7"}) || !reflect.DeepEqual(lists, []int{3}) {
		t.Errorf("literals %v lists %v", lits, lists)
	}
}

func TestTablesOfStatements(t *testing.T) {
	for _, tc := range []struct {
		text string
		want string
	}{
		{"SELECT * FROM `p` WHERE ID = ?", "d.p"},
		{"SELECT `p` . `name` , `g` . `gname` FROM `p` JOIN `g` ON `g` . `id` = `p` . `guild` WHERE `p` . `id` = ?", "d.p d.g"},
		{"SELECT a FROM `x` . `p` , `q` WHERE `p` . `id` = `q` . `id`", "x.p d.q"},
		{"SELECT a FROM p WHERE id IN ( SELECT id FROM q ) ORDER BY a", "d.p d.q"},
		{"INSERT INTO `p` ( `guild` , `coins` , NAME ) VALUES (...)", "d.p"},
		{"UPDATE `p` SET `coins` = `coins` + ? WHERE ID = ?", "d.p"},
		{"DELETE FROM p WHERE id = ?", "d.p"},
		{"SELECT ? FROM DUAL", ""},
	} {
		var got []string
		for _, n := range Tables(tc.text, "d") {
			got = append(got, n.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Tables(%q) = %v, want %s", tc.text, got, tc.want)
		}
	}
}

const slowLog = `/usr/sbin/mariadbd, Version: 10.11.6-MariaDB-log (Debian). started with:
Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock
Time		    Id Command	Argument
# Time: 241201  2:40:00
# User@Host: app[app] @ localhost []
# Thread_id: 8  Schema: game  QC_hit: No
# Query_time: 0.000100  Lock_time: 0.000010  Rows_sent: 1  Rows_examined: 1
# Rows_affected: 0  Bytes_sent: 100
SET timestamp=1733020800;
SELECT * FROM players WHERE id = 5;
# User@Host: app[app] @ localhost []
# Thread_id: 8  Schema: game  QC_hit: No
# Query_time: 0.000300  Lock_time: 0.000020  Rows_sent: 1  Rows_examined: 1
SET timestamp=1733020800;
SELECT * FROM players
  WHERE id = 77;
# Time: 241201  2:40:01
# User@Host: app[app] @ localhost []
# Thread_id: 9  Schema: game  QC_hit: No
# Query_time: 0.5  Lock_time: 0.1  Rows_sent: 1  Rows_examined: 20000
SET timestamp=1733020801;
SELECT SUM(coins) FROM players;
`

const generalLog = `/usr/sbin/mariadbd, Version: 10.11.6-MariaDB-log (Debian). started with:
Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock
Time		    Id Command	Argument
241201  2:40:00	     8 Connect	app@localhost on game using Socket
		     8 Query	SELECT * FROM players WHERE id = 5
		     8 Query	SELECT * FROM players WHERE id = 6
		     8 Init DB	other
		     8 Prepare	SELECT * FROM players WHERE id = ?
		     8 Execute	SELECT * FROM players WHERE id = 9
		     8 Quit	
`

func TestParseLogs(t *testing.T) {
	stmts, format, err := ParseLog(strings.NewReader(slowLog))
	if err != nil || format != SlowLog {
		t.Fatalf("slow log: %v %q", err, format)
	}
	if len(stmts) != 2 || stmts[0].Count != 2 || stmts[0].Schema != "game" || stmts[0].RowsExamined != 2 ||
		stmts[1].RowsExamined != 20000 || stmts[1].Seconds != 0.5 || stmts[0].Text != "SELECT * FROM players WHERE id = ?" {
		t.Fatalf("slow log statements: %+v", stmts)
	}
	stmts, format, err = ParseLog(strings.NewReader(generalLog))
	if err != nil || format != GeneralLog {
		t.Fatalf("general log: %v %q", err, format)
	}
	if len(stmts) != 2 || stmts[0].Count != 2 || stmts[0].Schema != "game" || stmts[1].Schema != "other" || stmts[0].RowsExamined != -1 {
		t.Fatalf("general log statements: %+v", stmts)
	}
	if _, _, err := ParseLog(strings.NewReader("hello\nworld\n")); !errors.Is(err, ErrNotALog) {
		t.Fatalf("foreign file: %v", err)
	}
}

func TestForTableAttributesAndShares(t *testing.T) {
	stmts := []Statement{
		{Schema: "d", Text: "SELECT * FROM `p` WHERE ID = ?", Count: 90, Seconds: 1},
		{Schema: "d", Text: "SELECT SUM ( `coins` ) FROM `p`", Count: 1, Seconds: 3},
		{Schema: "d", Text: "INSERT INTO `p` SELECT * FROM `g`", Count: 1, Seconds: 1},
		{Schema: "d", Text: "SELECT * FROM `g` WHERE ID = ?", Count: 50, Seconds: 9},
	}
	c, err := ForTable(stmts, "d", "p", "test", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Statements) != 3 || c.Statements[0].Share != 0.6 || c.Statements[2].Replay || c.Covered() != 0.8 {
		t.Fatalf("capture: %+v covered %v", c.Statements, c.Covered())
	}
	if _, err := ForTable(stmts, "d", "nothing", "test", true); !errors.Is(err, ErrNoStatements) {
		t.Fatalf("no statements: %v", err)
	}
}

func TestShapeOfDigests(t *testing.T) {
	size := func(col string, example int) int {
		if example > 0 {
			return example
		}
		return 2
	}
	for _, tc := range []struct {
		st     Statement
		sql    string
		params string
	}{
		{Statement{Schema: "d", Text: "SELECT * FROM `p` WHERE ID IN (...)"}, "SELECT * FROM `d` . `p` WHERE ID IN (?, ?)", "eq:ID eq:ID"},
		{Statement{Schema: "d", Text: "SELECT * FROM `p` WHERE ID IN (...)", Example: "SELECT * FROM p WHERE id IN (1,2,3)"}, "SELECT * FROM `d` . `p` WHERE ID IN (?, ?, ?)", "eq:ID eq:ID eq:ID"},
		{Statement{Schema: "d", Text: "SELECT ID FROM `p` WHERE ID BETWEEN ? AND ?"}, "SELECT ID FROM `d` . `p` WHERE ID BETWEEN ? AND ?", "lower:ID upper:ID"},
		{Statement{Schema: "d", Text: "SELECT * FROM `p` ORDER BY `coins` DESC LIMIT ?", Example: "SELECT * FROM p ORDER BY coins DESC LIMIT 10"}, "SELECT * FROM `d` . `p` ORDER BY `coins` DESC LIMIT ?", "limit=10"},
		{Statement{Schema: "d", Text: "INSERT INTO `p` ( `guild` , `coins` , NAME ) VALUES (...) /* , ... */"}, "INSERT INTO `d` . `p` ( `guild` , `coins` , NAME ) VALUES (?, ?, ?)", "value:guild value:coins value:NAME"},
		{Statement{Schema: "d", Text: "UPDATE `p` SET `coins` = `coins` + ? WHERE ID = ?"}, "UPDATE `d` . `p` SET `coins` = `coins` + ? WHERE ID = ?", "other eq:ID"},
		{Statement{Schema: "d", Text: "SELECT `p` . `name` , `g` . `gname` FROM `p` JOIN `g` ON `g` . `id` = `p` . `guild` WHERE `p` . `id` = ?"},
			"SELECT `p` . `name` , `g` . `gname` FROM `d` . `p` JOIN `d` . `g` ON `g` . `id` = `p` . `guild` WHERE `p` . `id` = ?", "eq:id"},
		{Statement{Schema: "d", Text: "SELECT COUNT ( * ) FROM `p` WHERE `coins` > ? LIMIT ? , ?"}, "SELECT COUNT( * ) FROM `d` . `p` WHERE `coins` > ? LIMIT ? , ?", "lower:coins offset limit"},
		{Statement{Schema: "d", Text: "INSERT INTO `p` SELECT `seq` % ? , `CONCAT` ( ? , `seq` ) FROM `x` . `s`"}, "INSERT INTO `d` . `p` SELECT `seq` % ? , CONCAT( ? , `seq` ) FROM `x` . `s`", "other other"},
	} {
		sh, err := ShapeOf(tc.st, ShapeOptions{Columns: []string{"id", "a"}, ListSize: size})
		if err != nil {
			t.Errorf("%s: %v", tc.st.Text, err)
			continue
		}
		var ps []string
		for _, p := range sh.Params {
			s := p.Kind
			if p.Column != "" {
				s += ":" + p.Column
			}
			if p.Example != "" {
				s += "=" + p.Example
			}
			ps = append(ps, s)
		}
		if sh.SQL != tc.sql || strings.Join(ps, " ") != tc.params {
			t.Errorf("ShapeOf(%q)\n = %q %v\nwant %q %s", tc.st.Text, sh.SQL, ps, tc.sql, tc.params)
		}
	}
	target := ShapeOptions{ListSize: size, Table: TableName{"d", "p"}, Target: TableName{"s", "p_1"}}
	if sh, _ := ShapeOf(Statement{Schema: "d", Text: "SELECT `p` . `a` FROM `p` JOIN `g` ON `g` . `id` = `p` . `id` WHERE `p` . `id` = ?"}, target); sh.SQL != "SELECT `p` . `a` FROM `s` . `p_1` AS `p` JOIN `d` . `g` ON `g` . `id` = `p` . `id` WHERE `p` . `id` = ?" {
		t.Errorf("rewritten to the target with an alias: %s", sh.SQL)
	}
	if sh, _ := ShapeOf(Statement{Schema: "d", Text: "SELECT `x` . `a` FROM `p` `x` WHERE `x` . `id` = ?"}, target); sh.SQL != "SELECT `x` . `a` FROM `s` . `p_1` `x` WHERE `x` . `id` = ?" {
		t.Errorf("rewritten to the target keeping its alias: %s", sh.SQL)
	}
	if _, err := ShapeOf(Statement{Text: "SELECT a , b , c FROM `p` WHERE ..."}, ShapeOptions{ListSize: size}); err == nil {
		t.Error("a truncated digest was shaped")
	}
}
