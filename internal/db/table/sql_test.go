package table

import (
	"reflect"
	"strings"
	"testing"
)

func sqlInfo(schema, name string, key []string, cols ...Column) *Info {
	ix := Index{Name: "PRIMARY", Unique: true, Type: "BTREE"}
	for _, k := range key {
		ix.Columns = append(ix.Columns, IndexColumn{Name: k})
	}
	return &Info{Schema: schema, Name: name, Columns: cols, Indexes: []Index{ix}}
}

func TestSQLStatements(t *testing.T) {
	simple := sqlInfo("db", "t", []string{"id"}, Column{Name: "id", DataType: "int"}, Column{Name: "v", DataType: "varchar", Nullable: true},
		Column{Name: "g", DataType: "int", Generated: true})
	// Hostile names: backticks, spaces, keywords and a name that looks like a comment.
	hostile := sqlInfo("d`b", "t`; DROP", []string{"a`b", "select"},
		Column{Name: "a`b", DataType: "varchar"}, Column{Name: "select", DataType: "int"}, Column{Name: "x -- y", DataType: "text", Nullable: true})
	s1, err := NewSQL(simple, "_t_new")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := NewSQL(hostile, "_t`; DROP_new")
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := []any{int64(5)}, []any{int64(9)}
	clo, chi := []any{"p", 1}, []any{"q", 2}
	type out struct {
		sql  string
		args []any
	}
	two := func(s string, a []any) out { return out{s, a} }
	cases := []struct {
		name string
		got  out
		want out
	}{
		{"bound first", two(s1.Bound(nil)), out{"SELECT `id` FROM `db`.`t` FORCE INDEX (`PRIMARY`) WHERE 1=1 ORDER BY `id` LIMIT 1 OFFSET ?", nil}},
		{"bound next", two(s1.Bound(lo)), out{"SELECT `id` FROM `db`.`t` FORCE INDEX (`PRIMARY`) WHERE ((`id` > ?)) ORDER BY `id` LIMIT 1 OFFSET ?", lo}},
		{"stage create", out{s1.StageCreate(), nil}, out{"CREATE TEMPORARY TABLE `db`.`_enginemig_stage` ENGINE=MyISAM SELECT `id`,`v` FROM `db`.`t` LIMIT 0", nil}},
		{"stage fill", two(s1.StageFill(Range{lo, hi})),
			out{"INSERT INTO `db`.`_enginemig_stage` (`id`,`v`) SELECT `id`,`v` FROM `db`.`t` FORCE INDEX (`PRIMARY`) WHERE ((`id` > ?)) AND NOT ((`id` > ?))", []any{int64(5), int64(9)}}},
		{"stage drain", out{s1.StageDrain(Replace), nil}, out{"REPLACE INTO `db`.`_t_new` (`id`,`v`) SELECT `id`,`v` FROM `db`.`_enginemig_stage`", nil}},
		{"hostile stage", out{s2.StageDrain(InsertIgnore), nil}, out{"INSERT IGNORE INTO `d``b`.`_t``; DROP_new` (`a``b`,`select`,`x -- y`) SELECT `a``b`,`select`,`x -- y` FROM `d``b`.`_enginemig_stage`", nil}},
		{"read range", two(s1.ReadRange(Range{lo, hi})),
			out{"SELECT `id`,`v` FROM `db`.`t` FORCE INDEX (`PRIMARY`) WHERE ((`id` > ?)) AND NOT ((`id` > ?)) ORDER BY `id`", []any{int64(5), int64(9)}}},
		{"read first range", two(s1.ReadRange(Range{Hi: hi})),
			out{"SELECT `id`,`v` FROM `db`.`t` FORCE INDEX (`PRIMARY`) WHERE NOT ((`id` > ?)) ORDER BY `id`", hi}},
		{"copy closed range", two(s1.CopyRange(Range{lo, hi}, Replace)),
			out{"REPLACE INTO `db`.`_t_new` (`id`,`v`) SELECT `id`,`v` FROM `db`.`t` FORCE INDEX (`PRIMARY`) WHERE ((`id` > ?)) AND NOT ((`id` > ?))", []any{int64(5), int64(9)}}},
		{"copy open range, insert ignore", two(s1.CopyRange(Range{Hi: hi}, InsertIgnore)),
			out{"INSERT IGNORE INTO `db`.`_t_new` (`id`,`v`) SELECT `id`,`v` FROM `db`.`t` FORCE INDEX (`PRIMARY`) WHERE NOT ((`id` > ?))", hi}},
		{"copy whole table", two(s1.CopyRange(Range{}, Replace)),
			out{"REPLACE INTO `db`.`_t_new` (`id`,`v`) SELECT `id`,`v` FROM `db`.`t` FORCE INDEX (`PRIMARY`) WHERE 1=1", nil}},
		{"write rows", out{s1.WriteRows(2, Replace), nil}, out{"REPLACE INTO `db`.`_t_new` (`id`,`v`) VALUES (?,?),(?,?)", nil}},
		{"delete keys", out{s1.DeleteKeys(3), nil}, out{"DELETE FROM `db`.`_t_new` WHERE `id` IN (?,?,?)", nil}},
		{"delete range", two(s1.DeleteRange(Range{Lo: lo})), out{"DELETE FROM `db`.`_t_new` WHERE ((`id` > ?))", lo}},
		{"checksum source", two(s1.Checksum(Range{lo, hi}, false)),
			out{"SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT(CRC32(CONCAT_WS('#', CONCAT(ISNULL(`v`)),`id`,CAST(`v` AS BINARY))), '#', CONCAT_WS('#', CONCAT(ISNULL(`v`)),`id`,CAST(`v` AS BINARY))))), 0) FROM `db`.`t` WHERE ((`id` > ?)) AND NOT ((`id` > ?))", []any{int64(5), int64(9)}}},
		{"checksum target", two(s1.Checksum(Range{}, true)),
			out{"SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT(CRC32(CONCAT_WS('#', CONCAT(ISNULL(`v`)),`id`,CAST(`v` AS BINARY))), '#', CONCAT_WS('#', CONCAT(ISNULL(`v`)),`id`,CAST(`v` AS BINARY))))), 0) FROM `db`.`_t_new` WHERE 1=1", nil}},
		{"delete missing", two(s1.DeleteMissing(Range{Hi: hi})),
			out{"DELETE FROM `db`.`_t_new` WHERE NOT ((`db`.`_t_new`.`id` > ?)) AND NOT EXISTS (SELECT 1 FROM `db`.`t` s WHERE s.`id` = `db`.`_t_new`.`id`)", hi}},
		{"hostile bound", two(s2.Bound(clo)),
			out{"SELECT `a``b`,`select` FROM `d``b`.`t``; DROP` FORCE INDEX (`PRIMARY`) WHERE ((`a``b` > ?) OR (`a``b` = ? AND `select` > ?)) ORDER BY `a``b`,`select` LIMIT 1 OFFSET ?", []any{"p", "p", 1}}},
		{"hostile copy", two(s2.CopyRange(Range{clo, chi}, Replace)),
			out{"REPLACE INTO `d``b`.`_t``; DROP_new` (`a``b`,`select`,`x -- y`) SELECT `a``b`,`select`,`x -- y` FROM `d``b`.`t``; DROP` FORCE INDEX (`PRIMARY`) WHERE ((`a``b` > ?) OR (`a``b` = ? AND `select` > ?)) AND NOT ((`a``b` > ?) OR (`a``b` = ? AND `select` > ?))", []any{"p", "p", 1, "q", "q", 2}}},
		{"hostile delete keys", out{s2.DeleteKeys(2), nil}, out{"DELETE FROM `d``b`.`_t``; DROP_new` WHERE (`a``b`=? AND `select`=?) OR (`a``b`=? AND `select`=?)", nil}},
	}
	for _, c := range cases {
		if c.got.sql != c.want.sql {
			t.Errorf("%s:\n got %s\nwant %s", c.name, c.got.sql, c.want.sql)
		}
		if !reflect.DeepEqual(c.got.args, c.want.args) {
			t.Errorf("%s: args %v, want %v", c.name, c.got.args, c.want.args)
		}
	}
	if !s1.IntKey() || s2.IntKey() {
		t.Errorf("IntKey: simple %v (want true), hostile %v (want false)", s1.IntKey(), s2.IntKey())
	}
	if got := s2.KeyPositions(); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Errorf("hostile key positions %v", got)
	}
}

// A table without a unique key: ranges walk the first column of a non-unique index, every write
// is a plain INSERT, deletes and updates touch one row equal to the image, character columns
// compare as bytes, and checksums add up (identical rows must not cancel as they do in BIT_XOR).
func TestKeylessSQL(t *testing.T) {
	info := &Info{Schema: "db", Name: "t", Columns: []Column{
		{Name: "k", DataType: "int"}, {Name: "s", DataType: "varchar", Charset: "utf8mb4", Nullable: true},
		{Name: "e", DataType: "enum", Charset: "utf8mb4"}},
		Indexes: []Index{{Name: "s", Type: "BTREE", Columns: []IndexColumn{{Name: "s"}}},
			{Name: "by_k", Type: "BTREE", Columns: []IndexColumn{{Name: "k"}, {Name: "s"}}}}}
	s, err := NewSQL(info, "_t_new")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Keyless() || !s.Chunked() || !reflect.DeepEqual(s.KeyPositions(), []int{0}) {
		t.Fatalf("keyless %v chunked %v key at %v", s.Keyless(), s.Chunked(), s.KeyPositions())
	}
	lo, hi := []any{int64(5)}, []any{int64(9)}
	cp, _ := s.CopyRange(Range{lo, hi}, Replace)
	for got, want := range map[string]string{
		cp:                           "INSERT INTO `db`.`_t_new` (`k`,`s`,`e`) SELECT `k`,`s`,`e` FROM `db`.`t` FORCE INDEX (`by_k`) WHERE ((`k` > ?)) AND ((`k` <= ?))",
		s.WriteRows(1, InsertIgnore): "INSERT INTO `db`.`_t_new` (`k`,`s`,`e`) VALUES (?,?,?)",
		s.DeleteOne():                "DELETE FROM `db`.`_t_new` WHERE `k` = ? AND `s` <=> BINARY ? AND `e` = ? LIMIT 1",
		s.UpdateOne():                "UPDATE `db`.`_t_new` SET `k` = ?, `s` = ?, `e` = ? WHERE `k` = ? AND `s` <=> BINARY ? AND `e` = ? LIMIT 1",
	} {
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	if sum, _ := s.Checksum(Range{}, true); !strings.Contains(sum, "COALESCE(SUM(CRC32(CONCAT(CRC32(") {
		t.Errorf("checksum %s", sum)
	}
	rc := s.Recopy(Range{lo, hi})
	if len(rc) != 2 || !strings.HasPrefix(rc[0].SQL, "DELETE FROM `db`.`_t_new` WHERE") || !strings.HasPrefix(rc[1].SQL, "INSERT INTO") {
		t.Errorf("recopy %+v: want the range deleted, then copied", rc)
	}
	// No index whose first column is an integer NOT NULL: one range, the whole table.
	info.Indexes = info.Indexes[:1]
	if s, _ = NewSQL(info, "_t_new"); s.Chunked() || s.Probe() != "SELECT 1 FROM `db`.`t` LIMIT 1" {
		t.Errorf("chunked %v, probe %q", s.Chunked(), s.Probe())
	}
	if cp, _ = s.CopyRange(Range{}, Replace); cp != "INSERT INTO `db`.`_t_new` (`k`,`s`,`e`) SELECT `k`,`s`,`e` FROM `db`.`t`  WHERE 1=1" {
		t.Errorf("whole-table copy %q", cp)
	}
}

// The row id apply adds to a keyless table's InnoDB copy: the shadow gets it as an invisible
// primary key, and once there it is neither copied nor a key that addresses rows (rollback
// replays the converted table back into the keyless original).
func TestRowID(t *testing.T) {
	ti := &Info{Schema: "db", Name: "t", Columns: []Column{{Name: "a", DataType: "int"}},
		CreateSQL: "CREATE TABLE `t` (\n  `a` int(11) NOT NULL,\n  KEY `a` (`a`)\n) ENGINE=MyISAM DEFAULT CHARSET=latin1",
		Indexes:   []Index{{Name: "a", Type: "BTREE", Columns: []IndexColumn{{Name: "a"}}}}}
	d, err := ti.Shadow("_t_new", true, true)
	if err != nil || !d.RowID || !strings.Contains(d.Create, "`_enginemig_rowid` bigint(20) unsigned NOT NULL AUTO_INCREMENT INVISIBLE,\n  PRIMARY KEY (`_enginemig_rowid`)") {
		t.Fatalf("%v\n%s", err, d.Create)
	}
	if d, _ := ti.Shadow("_t_new", true, false); d.RowID || strings.Contains(d.Create, RowIDColumn) {
		t.Fatalf("rowID false added it:\n%s", d.Create)
	}
	converted := &Info{Schema: "db", Name: "t", Columns: []Column{{Name: "a", DataType: "int"},
		{Name: RowIDColumn, DataType: "bigint", Extra: "auto_increment, INVISIBLE"}},
		Indexes: []Index{{Name: "PRIMARY", Unique: true, Type: "BTREE", Columns: []IndexColumn{{Name: RowIDColumn}}}}}
	if !converted.Keyless() || len(converted.CopyColumns()) != 1 || converted.CanAddRowID() {
		t.Fatalf("keyless %v, copy columns %v", converted.Keyless(), converted.CopyColumns())
	}
	for v, want := range map[string]bool{"10.3.2-MariaDB": false, "10.3.3-MariaDB": true, "10.11.6-MariaDB-log": true,
		"8.0.22": false, "8.0.23": true, "9.7.0": true, "5.7.44-log": false} {
		if RowIDSupported(v) != want {
			t.Errorf("RowIDSupported(%q) = %v", v, !want)
		}
	}
}
