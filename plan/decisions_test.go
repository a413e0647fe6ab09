package plan

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/table"
)

// These tests drive the decision functions with hand-built inputs, for behaviour a MariaDB 10.11
// server cannot produce: MySQL-only variables and versions, and limits MyISAM shares with InnoDB
// on MariaDB (64 indexes, 32 key parts).

func server(version string, vars map[string]string) *ServerInfo {
	s := &ServerInfo{Variables: vars, Status: map[string]int64{}, FreeDiskBytes: -1}
	if s.Variables == nil {
		s.Variables = map[string]string{}
	}
	s.setVersion(version)
	return s
}

func severities(fs []Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Check+":"+string(f.Severity))
	}
	return strings.Join(out, ",")
}

func intCol(name string) table.Column {
	return table.Column{Name: name, DataType: "int", ColumnType: "int(11)"}
}

func TestTableDecisions(t *testing.T) {
	pk := table.Index{Name: "PRIMARY", Unique: true, Type: "BTREE", Columns: []table.IndexColumn{{Name: "id"}}}
	withAuto := table.Column{Name: "id", DataType: "int", ColumnType: "int(11)", Extra: "auto_increment"}
	manyIndexes := []table.Index{pk}
	for i := 0; i < 65; i++ {
		manyIndexes = append(manyIndexes, table.Index{Name: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Type: "BTREE", Columns: []table.IndexColumn{{Name: "id"}}})
	}
	wideKey := table.Index{Name: "wide", Type: "BTREE"}
	for i := 0; i < 20; i++ {
		wideKey.Columns = append(wideKey.Columns, table.IndexColumn{Name: "id"})
	}
	noKey := &table.Info{Schema: "s", Name: "t", Columns: []table.Column{intCol("a")}}
	keylessIndexed := &table.Info{Schema: "s", Name: "t", Columns: []table.Column{intCol("a")},
		Indexes: []table.Index{{Name: "a", Type: "BTREE", Columns: []table.IndexColumn{{Name: "a"}}}}}
	uniqueNotNull := &table.Info{Schema: "s", Name: "t", Columns: []table.Column{intCol("a")},
		Indexes: []table.Index{{Name: "a", Unique: true, Type: "BTREE", Columns: []table.IndexColumn{{Name: "a"}}}}}
	withPK := &table.Info{Schema: "s", Name: "t", Columns: []table.Column{withAuto}, Indexes: []table.Index{pk}}
	withUnique := &table.Info{Schema: "s", Name: "t", Columns: []table.Column{withAuto, intCol("u")}, Indexes: []table.Index{pk,
		{Name: "u", Unique: true, Type: "BTREE", Columns: []table.IndexColumn{{Name: "u"}}}}}
	for _, tc := range []struct {
		name  string
		check func(*TableInput) []Finding
		in    TableInput
		want  string
	}{
		{"partitioned on MariaDB warns", checkPartitioned, TableInput{Partitions: 2, Server: server("10.11.6-MariaDB", nil)}, "partitioned:warning"},
		{"partitioned on MySQL 5.7 warns", checkPartitioned, TableInput{Partitions: 2, Server: server("5.7.44-log", nil)}, "partitioned:warning"},
		{"partitioned on MySQL 8.0 blocks", checkPartitioned, TableInput{Partitions: 2, Server: server("8.0.36", nil)}, "partitioned:blocker"},
		{"sql_require_primary_key refuses a unique-key table", checkRequirePK, TableInput{Info: uniqueNotNull, Server: server("8.0.36", map[string]string{"sql_require_primary_key": "ON"})}, "require-pk-setting:blocker"},
		{"innodb_force_primary_key accepts a unique NOT NULL key", checkRequirePK, TableInput{Info: uniqueNotNull, Server: server("10.11.6-MariaDB", map[string]string{"innodb_force_primary_key": "ON"})}, ""},
		{"a one-chunk copy past the hold limit blocks", checkKeylessHold, TableInput{Info: noKey, Server: server("10.11.6-MariaDB", nil), Estimate: &Estimate{CopySeconds: 5}}, "keyless-hold:blocker"},
		{"a one-chunk copy within the hold limit", checkKeylessHold, TableInput{Info: noKey, Server: server("10.11.6-MariaDB", nil), Estimate: &Estimate{CopySeconds: 0.5}}, ""},
		{"a hold limit raised by --max-hold", checkKeylessHold, TableInput{Info: noKey, Server: maxHold(server("10.11.6-MariaDB", nil), 10*time.Second), Estimate: &Estimate{CopySeconds: 5}}, ""},
		{"a keyless table converts with binlog capture", checkKeyless, TableInput{Info: noKey, Server: server("10.11.6-MariaDB", nil)}, "keyless:warning"},
		{"a unique key's table is not keyless", checkKeyless, TableInput{Info: uniqueNotNull, Server: server("10.11.6-MariaDB", nil)}, ""},
		{"a keyless table with trigger capture is refused", checkNoUsableKey, TableInput{Info: noKey, Server: wantCapture(server("10.11.6-MariaDB", nil), "triggers")}, "no-usable-key:blocker"},
		{"a keyless table with an index to walk and trigger capture", checkNoUsableKey, TableInput{Info: keylessIndexed, Server: wantCapture(server("10.11.6-MariaDB", nil), "triggers")}, ""},
		{"a keyless table with binlog capture is not refused", checkNoUsableKey, TableInput{Info: noKey, Server: wantCapture(server("10.11.6-MariaDB", nil), "binlog")}, ""},
		{"innodb_force_primary_key refuses a keyless table without INVISIBLE", checkRequirePK, TableInput{Info: noKey, Server: server("10.2.44-MariaDB", map[string]string{"innodb_force_primary_key": "ON"})}, "require-pk-setting:blocker"},
		{"the added row id satisfies innodb_force_primary_key", checkRequirePK, TableInput{Info: noKey, Server: server("10.11.6-MariaDB", map[string]string{"innodb_force_primary_key": "ON"})}, ""},
		{"the added row id satisfies sql_require_primary_key", checkRequirePK, TableInput{Info: noKey, Server: server("8.0.36", map[string]string{"sql_require_primary_key": "ON"})}, ""},
		{"generated invisible primary key warns", checkRequirePK, TableInput{Info: uniqueNotNull, Server: server("8.0.36", map[string]string{"sql_generate_invisible_primary_key": "ON"})}, "require-pk-setting:warning"},
		{"a primary key satisfies every setting", checkRequirePK, TableInput{Info: withPK, Server: server("8.0.36", map[string]string{"sql_require_primary_key": "ON", "sql_generate_invisible_primary_key": "ON"})}, ""},
		{"galera, trigger capture, primary key only", checkGaleraCapture, TableInput{Info: withPK, Server: galera(wantCapture(server("10.11.6-MariaDB", nil), "triggers"))}, ""},
		{"galera, trigger capture, unique secondary index", checkGaleraCapture, TableInput{Info: withUnique, Server: galera(wantCapture(server("10.11.6-MariaDB", nil), "triggers"))}, "galera-capture:blocker"},
		{"galera, trigger capture, no usable key", checkGaleraCapture, TableInput{Info: keylessIndexed, Server: galera(wantCapture(server("10.11.6-MariaDB", nil), "triggers"))}, "galera-capture:blocker"},
		{"galera, binlog capture, unique secondary index", checkGaleraCapture, TableInput{Info: withUnique, Server: galera(wantCapture(server("10.11.6-MariaDB", map[string]string{"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL"}), "binlog"))}, ""},
		{"galera, binlog capture, no usable key, temporary tables granted", checkGaleraCapture, TableInput{Info: keylessIndexed, Server: grants(galera(wantCapture(binlogServer(), "binlog")), "GRANT ALL PRIVILEGES ON `s`.* TO `em`@`%`")}, ""},
		{"galera, binlog capture, no usable key, no temporary tables", checkGaleraCapture, TableInput{Info: keylessIndexed, Server: grants(galera(wantCapture(binlogServer(), "binlog")), "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `em`@`%`", "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, LOCK TABLES ON `s`.* TO `em`@`%`")}, "galera-capture:blocker"},
		{"galera, binlog capture, primary key, no temporary tables", checkGaleraCapture, TableInput{Info: withPK, Server: grants(galera(wantCapture(binlogServer(), "binlog")), "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, LOCK TABLES ON `s`.* TO `em`@`%`")}, ""},
		{"not galera, trigger capture, unique secondary index", checkGaleraCapture, TableInput{Info: withUnique, Server: wantCapture(server("10.11.6-MariaDB", nil), "triggers")}, ""},
		{"autoinc reuse before MariaDB 10.2.4", checkAutoincReuse, TableInput{Info: withPK, Server: server("10.1.48-MariaDB", nil)}, "autoinc-reuse:warning"},
		{"no autoinc reuse on MariaDB 10.2.4", checkAutoincReuse, TableInput{Info: withPK, Server: server("10.2.4-MariaDB", nil)}, ""},
		{"autoinc reuse on MySQL 5.7", checkAutoincReuse, TableInput{Info: withPK, Server: server("5.7.44", nil)}, "autoinc-reuse:warning"},
		{"no autoinc reuse on MySQL 8.0", checkAutoincReuse, TableInput{Info: withPK, Server: server("8.0.0", nil)}, ""},
		{"65 secondary indexes", checkTooManyIndexes, TableInput{Info: &table.Info{Columns: []table.Column{withAuto}, Indexes: manyIndexes}, Server: server("10.11.6-MariaDB", nil)}, "too-many-indexes:blocker"},
		{"20 key parts fit MariaDB", checkTooManyIndexes, TableInput{Info: &table.Info{Columns: []table.Column{withAuto}, Indexes: []table.Index{pk, wideKey}}, Server: server("10.11.6-MariaDB", nil)}, ""},
		{"20 key parts exceed MySQL", checkTooManyIndexes, TableInput{Info: &table.Info{Columns: []table.Column{withAuto}, Indexes: []table.Index{pk, wideKey}}, Server: server("8.0.36", nil)}, "too-many-indexes:blocker"},
		{"insert delayed on MySQL is info", checkInsertDelayed, TableInput{Info: withPK, Server: withDigests(server("5.7.44", nil), Digest{Schema: "s", Text: "INSERT DELAYED INTO `t` VALUES (...)", Count: 3})}, "insert-delayed:info"},
		{"insert delayed on MariaDB blocks", checkInsertDelayed, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil), Digest{Schema: "x", Text: "INSERT DELAYED INTO `s` . `t` VALUES (...)", Count: 1})}, "insert-delayed:blocker"},
		{"insert delayed into another database's t", checkInsertDelayed, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil), Digest{Schema: "other", Text: "INSERT DELAYED INTO `t` VALUES (...)", Count: 1})}, ""},
		{"count star with join is not count star", checkCountStar, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil), Digest{Schema: "s", Text: "SELECT COUNT ( * ) FROM `t` JOIN `u` USING ( `id` )", Count: 1})}, ""},
		{"fulltext with unequal token sizes names the setting", func(in *TableInput) []Finding {
			fs := checkFulltext(in)
			if len(fs) != 1 || !strings.Contains(fs[0].Remedy, "set innodb_ft_min_token_size=4 (now 3)") || strings.Contains(fs[0].Remedy, "max_token_size=") {
				return nil
			}
			return fs
		}, TableInput{Info: &table.Info{Columns: []table.Column{withAuto}, Indexes: []table.Index{pk, {Name: "ft", Type: "FULLTEXT"}}},
			Server: server("10.11.6-MariaDB", map[string]string{"ft_min_word_len": "4", "innodb_ft_min_token_size": "3", "ft_max_word_len": "84", "innodb_ft_max_token_size": "84"})}, "fulltext:warning"},
		{"limit without order by", checkLimitWithoutOrderBy, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil),
			Digest{Schema: "s", Text: "SELECT `id` FROM `t` WHERE `kind` = ? LIMIT ?", Count: 4},
			Digest{Schema: "s", Text: "SELECT `id` FROM `t` WHERE `kind` = ? ORDER BY `id` LIMIT ?", Count: 4},
			Digest{Schema: "s", Text: "SELECT `id` FROM `u` LIMIT ?", Count: 4},
			Digest{Schema: "s", Text: "SELECT * FROM `s` . `t` FORCE INDEX ( `PRIMARY` ) WHERE `id` > ? LIMIT ?", Count: 9},
			Digest{Schema: "s", Text: "SELECT `a` . `id` FROM `u` `a` JOIN `t` `b` USING ( `id` ) LIMIT ?", Count: 1})}, "limit-without-order-by:warning,limit-without-order-by:warning"},
		{"natural-language search", checkNaturalSearch, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil),
			Digest{Schema: "s", Text: "SELECT `id` FROM `t` WHERE MATCH ( `title` , `body` ) AGAINST ( ? )", Count: 2},
			Digest{Schema: "s", Text: "SELECT `id` FROM `t` WHERE MATCH ( `title` , `body` ) AGAINST ( ? IN BOOLEAN MODE )", Count: 2})}, "fulltext-natural:warning"},
		{"count star, one finding per statement", checkCountStar, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil),
			Digest{Schema: "s", Text: "SELECT COUNT ( * ) FROM `t`", Count: 1}, Digest{Text: "SELECT COUNT ( * ) FROM `s` . `t`", Count: 1})}, "count-star:warning,count-star:warning"},
		{"count star of a qualified table", checkCountStar, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil), Digest{Text: "SELECT COUNT ( * ) FROM `s` . `t`", Count: 1})}, "count-star:warning"},
		{"enginemig's own lock tables are not the application's", checkLockTables, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil),
			Digest{Text: "LOCK TABLES `s` . `t` READ , `s` . `t` AS `_enginemig_verify` READ", Count: 90},
			Digest{Text: "LOCK TABLES `s` . `t` READ , `s` . `t` AS `s` READ , `s` . `_t_new` WRITE", Count: 2},
			Digest{Text: "LOCK TABLES `s` . `t` WRITE , `s` . `t_emswap` WRITE", Count: 1})}, ""},
		{"lock tables lists the table second", checkLockTables, TableInput{Info: withPK, Server: withDigests(server("10.11.6-MariaDB", nil), Digest{Schema: "s", Text: "LOCK TABLES `u` READ , `t` AS `x` WRITE", Count: 1})}, "lock-tables:warning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Info == nil {
				tc.in.Info = withPK
			}
			if got := severities(tc.check(&tc.in)); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func withDigests(s *ServerInfo, ds ...Digest) *ServerInfo {
	s.Digests, s.DigestsAvailable = ds, true
	return s
}

func TestServerDecisions(t *testing.T) {
	rowOK := map[string]string{"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL"}
	for _, tc := range []struct {
		name  string
		check func(*ServerInfo) []Finding
		s     *ServerInfo
		want  string
	}{
		{"binlog off: triggers", checkBinlog, server("10.11.6-MariaDB", map[string]string{"log_bin": "OFF", "binlog_format": "ROW"}), "binlog:info"},
		{"binlog minimal image: triggers", checkBinlog, server("8.0.36", map[string]string{"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "MINIMAL"}), "binlog:info"},
		{"binlog mixed: triggers", checkBinlog, server("8.0.36", map[string]string{"log_bin": "ON", "binlog_format": "MIXED", "binlog_row_image": "FULL"}), "binlog:info"},
		{"binlog off, binlog asked for", checkBinlog, wantCapture(server("10.11.6-MariaDB", map[string]string{"log_bin": "OFF"}), CaptureBinlog), "binlog:blocker"},
		{"binlog mixed, binlog asked for", checkBinlog, wantCapture(server("8.0.36", map[string]string{"log_bin": "ON", "binlog_format": "MIXED"}), CaptureBinlog), "binlog:blocker"},
		{"binlog off under GTID consistency", checkBinlog, server("8.0.36", map[string]string{"log_bin": "OFF", "enforce_gtid_consistency": "ON"}), "binlog:blocker"},
		{"triggers asked for under GTID consistency", checkBinlog, wantCapture(server("8.0.36", map[string]string{"log_bin": "ON", "binlog_format": "ROW", "enforce_gtid_consistency": "ON"}), CaptureTriggers), "binlog:blocker"},
		{"triggers asked for", checkBinlog, wantCapture(server("10.11.6-MariaDB", rowOK), CaptureTriggers), "binlog:info"},
		{"binlog fine", checkBinlog, server("8.0.36", rowOK), ""},
		{"gtid consistency on", checkGTIDConsistency, server("8.0.36", map[string]string{"enforce_gtid_consistency": "ON"}), "gtid-consistency:warning"},
		{"gtid consistency warn", checkGTIDConsistency, server("8.0.36", map[string]string{"enforce_gtid_consistency": "WARN"}), "gtid-consistency:warning"},
		{"gtid consistency off", checkGTIDConsistency, server("8.0.36", map[string]string{"enforce_gtid_consistency": "OFF"}), ""},
		{"galera node, trigger capture", checkGalera, server("10.11.6-MariaDB", map[string]string{"wsrep_on": "ON", "wsrep_cluster_name": "c1"}), "galera:info"},
		{"galera provider loaded, wsrep off", checkGalera, server("10.11.6-MariaDB", map[string]string{"wsrep_on": "OFF"}), ""},
		{"no galera (MySQL)", checkGalera, server("8.0.36", nil), ""},
		{"MariaDB has no gtid consistency", checkGTIDConsistency, server("10.11.6-MariaDB", nil), ""},
		{"disk clearly short", checkServerDisk, withTotals(server("10.11.6-MariaDB", nil), 100<<20, 50<<20), "disk:warning"},
		{"disk tight", checkServerDisk, withTotals(server("10.11.6-MariaDB", nil), 100<<20, 120<<20), "disk:warning"},
		{"disk fine", checkServerDisk, withTotals(server("10.11.6-MariaDB", nil), 100<<20, 1<<40), "disk:info"},
		{"disk unknown", checkServerDisk, withTotals(server("10.11.6-MariaDB", nil), 100<<20, -1), "disk:info"},
		{"lock tables without digests", checkLockTablesCounter, withStatus(server("5.7.44", nil), "Com_lock_tables", 5), "lock-tables:warning"},
		{"status ignored when digests name tables", checkLockTablesCounter, withDigests(withStatus(server("5.7.44", nil), "Com_lock_tables", 5)), ""},
		{"lock tables all enginemig's own", checkLockTablesCounter, withOwnLocks(withStatus(server("10.11.6-MariaDB", nil), "Com_lock_tables", 232), 232), ""},
		{"lock tables beyond enginemig's own", checkLockTablesCounter, withOwnLocks(withStatus(server("10.11.6-MariaDB", nil), "Com_lock_tables", 233), 232), "lock-tables:warning"},
		{"insert delayed without digests", fallbackStatus("insert-delayed", "Delayed_writes", Warning, "x"), withStatus(server("5.7.44", nil), "Delayed_writes", 5), "insert-delayed:warning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := severities(tc.check(tc.s)); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func wantCapture(s *ServerInfo, want string) *ServerInfo {
	s.WantCapture = want
	return s
}

func withTotals(s *ServerInfo, need, free int64) *ServerInfo {
	s.Totals = &Totals{Tables: 1, ExtraDiskBytes: need}
	s.FreeDiskBytes = free
	return s
}

func withOwnLocks(s *ServerInfo, n int64) *ServerInfo {
	s.OwnLockTables = n
	return s
}

func withStatus(s *ServerInfo, k string, v int64) *ServerInfo {
	s.Status[k] = v
	return s
}

func TestTableDiskBlocksWhenClearlyShort(t *testing.T) {
	s := server("10.11.6-MariaDB", nil)
	s.FreeDiskBytes = 10 << 20
	in := &TableInput{Info: &table.Info{Schema: "s", Name: "t"}, Server: s, Estimate: &Estimate{ExtraDiskBytes: 20 << 20}}
	if got := severities(checkTableDisk(in)); got != "disk:blocker" {
		t.Fatalf("got %q", got)
	}
	in.Estimate.ExtraDiskBytes = 5 << 20
	if got := severities(checkTableDisk(in)); got != "" {
		t.Fatalf("got %q", got)
	}
}

func TestMergeCompile(t *testing.T) {
	static := []Finding{newFinding("row-too-large", Blocker, "estimated 9000 bytes", "r")}
	// InnoDB accepted what the estimate refused: the server wins, the estimate stays visible.
	got := mergeCompile(append([]Finding(nil), static...), &CompileResult{Ran: true})
	if severities(got) != "row-too-large:info" {
		t.Fatalf("accepted: %v", got)
	}
	// A refusal nobody predicted becomes a blocker under the mapped id, or shadow-compile.
	got = mergeCompile(nil, &CompileResult{Ran: true, ErrNumber: 1118, ErrMessage: "Row size too large"})
	if severities(got) != "row-too-large:blocker" {
		t.Fatalf("unpredicted 1118: %v", got)
	}
	got = mergeCompile(nil, &CompileResult{Ran: true, ErrNumber: 1286, ErrMessage: "Unknown storage engine"})
	if severities(got) != "shadow-compile:blocker" {
		t.Fatalf("unmapped: %v", got)
	}
	got = mergeCompile(append([]Finding(nil), static...), &CompileResult{Ran: true, ErrNumber: 1118, ErrMessage: "Row size too large"})
	if severities(got) != "row-too-large:blocker" || !strings.Contains(got[0].Message, "confirmed by test-compile") {
		t.Fatalf("confirmed: %v", got)
	}
	// Triggers are carried (info) unless the server refused to create one again.
	carried := []Finding{newFinding("triggers", Info, "1 trigger(s) (t_ai) are carried", "r")}
	got = mergeCompile(carried, &CompileResult{Ran: true, TriggerRefused: "trigger t_ai: Error 1054: Unknown column"})
	if severities(got) != "triggers:blocker" || !strings.Contains(got[0].Message, "t_ai: Error 1054") {
		t.Fatalf("refused trigger: %v", got)
	}
}

func TestInlineRowBytes(t *testing.T) {
	latin1 := func(n int64, typ string) table.Column {
		return table.Column{Name: "c", DataType: typ, ColumnType: typ + "(" + strconv.FormatInt(n, 10) + ")", OctetLength: n, Charset: "latin1"}
	}
	utf8 := table.Column{Name: "c", DataType: "char", ColumnType: "char(50)", OctetLength: 200, Charset: "utf8mb4"}
	many := func(c table.Column, n int) []table.Column {
		out := make([]table.Column, n)
		for i := range out {
			out[i] = c
		}
		return out
	}
	limit := maxRecordBytes(16384)
	if limit != 8126 {
		t.Fatalf("limit %d, want 8126 (InnoDB's documented figure)", limit)
	}
	for _, tc := range []struct {
		name string
		cols []table.Column
		over bool
	}{
		// The boundaries measured with CREATE TABLE on MariaDB 10.11 (see row-too-large.sql).
		{"40 varchar(250) latin1", many(latin1(250, "varchar"), 40), true},
		{"40 varchar(300) latin1", many(latin1(300, "varchar"), 40), false},
		{"40 char(255) latin1", many(latin1(255, "char"), 40), true},
		{"40 char(50) utf8mb4", many(utf8, 40), false},
	} {
		if got := inlineRowBytes(tc.cols, "DYNAMIC") > limit; got != tc.over {
			t.Errorf("%s: over=%v (%d bytes)", tc.name, got, inlineRowBytes(tc.cols, "DYNAMIC"))
		}
	}
	if got := decimalBytes(18, 9); got != 8 {
		t.Errorf("DECIMAL(18,9) = %d bytes, want 8", got)
	}
}

// PROCESS and performance_schema are optional: a warning names what each missing one costs.
func TestOptionalPrivileges(t *testing.T) {
	s := &ServerInfo{User: "em@%", Grants: ParseGrants([]string{
		"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `em`@`%`"})}
	got := optionalPrivileges(s)
	if len(got) != 1 || got[0].Severity != Warning || !strings.Contains(got[0].Message, "PROCESS: the cut-over cannot see long-running queries") ||
		!strings.Contains(got[0].Remedy, "GRANT SELECT ON performance_schema.*") || strings.Contains(got[0].Message, "1689") {
		t.Fatalf("got %+v", got)
	}
	s.Galera = &Galera{}
	if got := optionalPrivileges(s); len(got) != 1 || !strings.Contains(got[0].Message, "on this Galera node, the application's statements queued") {
		t.Fatalf("on a Galera node: got %+v", got)
	}
	s.Galera = nil
	s.Grants = ParseGrants([]string{"GRANT PROCESS, REPLICATION SLAVE ON *.* TO `em`@`%`", "GRANT SELECT ON `performance_schema`.* TO `em`@`%`"})
	if got := optionalPrivileges(s); len(got) != 0 {
		t.Fatalf("all optional grants present, got %+v", got)
	}
}

// apply copies two chunks at once unless an AUTO_INCREMENT column makes InnoDB run them one after
// another (ParallelCopy): on MariaDB in any innodb_autoinc_lock_mode, on MySQL below mode 2.
func TestParallelCopyFollowsTheAutoIncrementColumn(t *testing.T) {
	plain := &table.Info{Columns: []table.Column{intCol("id"), intCol("v")}}
	counted := &table.Info{Columns: []table.Column{{Name: "id", DataType: "int", ColumnType: "int(11)", Extra: "auto_increment"}, intCol("v")}}
	for _, c := range []struct {
		name    string
		mariaDB bool
		mode    int64
		info    *table.Info
		want    bool
	}{
		{"plain, MariaDB", true, 1, plain, true},
		{"plain, MySQL mode 0", false, 0, plain, true},
		{"AUTO_INCREMENT, MariaDB mode 2", true, 2, counted, false},
		{"AUTO_INCREMENT, MySQL mode 1", false, 1, counted, false},
		{"AUTO_INCREMENT, MySQL mode 2", false, 2, counted, true},
	} {
		got, why := ParallelCopy(c.mariaDB, c.mode, c.info)
		if got != c.want || (got == (why != "")) {
			t.Errorf("%s: parallel %v (%q), want %v and a reason only when not", c.name, got, why, c.want)
		}
		if !got && !strings.Contains(why, "(id)") {
			t.Errorf("%s: the reason %q does not name the column", c.name, why)
		}
	}
}

func maxHold(s *ServerInfo, d time.Duration) *ServerInfo {
	s.MaxHold = d
	return s
}

// binlogServer is a MariaDB 10.11 server with a ROW binlog.
func binlogServer() *ServerInfo {
	return server("10.11.6-MariaDB", map[string]string{"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL"})
}

// grants gives s's account the privileges of lines (SHOW GRANTS output).
func grants(s *ServerInfo, lines ...string) *ServerInfo {
	s.User, s.Grants = "em@%", ParseGrants(lines)
	return s
}

// galera makes s a Galera node as plan reads one.
func galera(s *ServerInfo) *ServerInfo {
	s.Galera = &Galera{Size: 3, Status: "Primary", State: "Synced"}
	return s
}

// A keyless log table indexed on (host, ts) and on ts alone: the copy walks the more distinct
// index, plan names it with the hold its average run of equal values takes, and keyless-hold
// stays silent (it is only for tables with no index to walk).
func TestKeylessPlanNamesTheWalkedIndex(t *testing.T) {
	host := table.Column{Name: "host", DataType: "varchar", ColumnType: "varchar(32)", Charset: "utf8mb4", Collation: "utf8mb4_general_ci", CharLength: 32}
	ts := table.Column{Name: "ts", DataType: "datetime", ColumnType: "datetime(6)", Nullable: true}
	info := &table.Info{Schema: "s", Name: "log", Columns: []table.Column{host, ts, {Name: "msg", DataType: "text", ColumnType: "text", Charset: "utf8mb4", Collation: "utf8mb4_general_ci"}},
		Indexes: []table.Index{
			{Name: "ts", Type: "BTREE", Columns: []table.IndexColumn{{Name: "ts", Cardinality: 1000}}},
			{Name: "host_ts", Type: "BTREE", Columns: []table.IndexColumn{{Name: "host", Cardinality: 20}, {Name: "ts", Cardinality: 500000}}},
			{Name: "msg", Type: "BTREE", Columns: []table.IndexColumn{{Name: "msg", SubPart: 10, Cardinality: 900000}}},
		}}
	in := &TableInput{Info: info, Server: server("10.11.6-MariaDB", nil), Estimate: &Estimate{Rows: 1000000, CopySeconds: 20}}
	f := checkKeyless(in)
	if len(f) != 1 || !strings.Contains(f[0].Message, "walks index `host_ts` by `host`, `ts`") || !strings.Contains(f[0].Message, "about 2 rows share a value") {
		t.Fatalf("keyless finding: %+v", f)
	}
	if f := checkKeylessHold(in); len(f) != 0 {
		t.Fatalf("keyless-hold for a table with an index to walk: %+v", f)
	}
}

// An ENUM-led index is walked (by member number); a SET-led one is not, and plan says which
// indexes can be walked when it blocks the one-chunk copy.
func TestKeylessPlanWalksEnumNotSet(t *testing.T) {
	status := table.Column{Name: "status", DataType: "enum", ColumnType: "enum('new','done','failed')", Charset: "utf8mb4", Collation: "utf8mb4_general_ci"}
	flags := table.Column{Name: "flags", DataType: "set", ColumnType: "set('a','b')", Charset: "utf8mb4", Collation: "utf8mb4_general_ci"}
	ts := table.Column{Name: "ts", DataType: "datetime", ColumnType: "datetime(6)", Nullable: true}
	withIndex := func(cols ...string) *TableInput {
		ix := table.Index{Name: "ix", Type: "BTREE"}
		for _, c := range cols {
			ix.Columns = append(ix.Columns, table.IndexColumn{Name: c, Cardinality: 1000})
		}
		info := &table.Info{Schema: "s", Name: "jobs", Columns: []table.Column{status, flags, ts}, Indexes: []table.Index{ix}}
		return &TableInput{Info: info, Server: server("10.11.6-MariaDB", nil), Estimate: &Estimate{Rows: 1000000, CopySeconds: 20}}
	}
	if f := checkKeyless(withIndex("status", "ts")); len(f) != 1 || !strings.Contains(f[0].Message, "walks index `ix` by `status`, `ts`") {
		t.Fatalf("ENUM-led index: %+v", f)
	}
	in := withIndex("flags", "ts")
	f := checkKeylessHold(in)
	if len(f) != 1 || f[0].Severity != Blocker || !strings.Contains(f[0].Message, "ENUM") || !strings.Contains(f[0].Message, "not by a SET") {
		t.Fatalf("SET-led index: %+v", f)
	}
	if f := checkKeyless(in); len(f) != 1 || !strings.Contains(f[0].Message, "no index can be walked") {
		t.Fatalf("SET-led index, keyless: %+v", f)
	}
}
