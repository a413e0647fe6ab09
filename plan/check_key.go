package plan

import (
	"strings"
)

func init() {
	registerTable("no-usable-key", Blocker,
		"no PRIMARY KEY and no UNIQUE key whose columns are all NOT NULL: the online copy cannot address rows",
		checkNoUsableKey)
	registerTable("require-pk-setting", Blocker,
		"sql_require_primary_key / innodb_force_primary_key would refuse the shadow, or sql_generate_invisible_primary_key would add a column",
		checkRequirePK)
}

func hasPrimary(in *TableInput) bool {
	for _, ix := range in.Info.Indexes {
		if ix.Name == "PRIMARY" {
			return true
		}
	}
	return false
}

func checkNoUsableKey(in *TableInput) []Finding {
	if in.Info == nil || in.Crashed != "" || len(in.Info.Columns) == 0 || isMerge(in) {
		return nil
	}
	if _, ok := in.Info.CopyKey(); ok {
		return nil
	}
	return []Finding{newFinding("no-usable-key", Blocker,
		"no PRIMARY KEY and no UNIQUE index on NOT NULL columns: rows cannot be addressed for the chunked copy and the binlog replay",
		"add a primary key (e.g. ALTER TABLE ... ADD id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, which blocks writes while it runs) or make a unique key's columns NOT NULL; then plan again")}
}

func checkRequirePK(in *TableInput) []Finding {
	if in.Info == nil || in.Server == nil || in.Crashed != "" || hasPrimary(in) {
		return nil
	}
	s := in.Server
	_, usable := in.Info.CopyKey()
	var out []Finding
	switch {
	case s.VarOn("sql_require_primary_key"):
		// MySQL refuses any table without a PRIMARY KEY, even with a unique NOT NULL key (error 3750).
		out = append(out, newFinding("require-pk-setting", Blocker,
			"sql_require_primary_key=ON: the server refuses to create the shadow, which has no PRIMARY KEY (error 3750)",
			"add a PRIMARY KEY to the table (or promote its unique NOT NULL key), or turn sql_require_primary_key off for enginemig's sessions"))
	case s.VarOn("innodb_force_primary_key") && !usable:
		// MariaDB accepts a unique NOT NULL key as the primary key; only tables without one are refused (error 1173).
		out = append(out, newFinding("require-pk-setting", Blocker,
			"innodb_force_primary_key=ON: InnoDB refuses the shadow, which has no PRIMARY KEY (error 1173)",
			"add a PRIMARY KEY to the table; then plan again"))
	}
	if s.VarOn("sql_generate_invisible_primary_key") {
		out = append(out, newFinding("require-pk-setting", Warning,
			"sql_generate_invisible_primary_key=ON: the shadow would get an invisible my_row_id column the MyISAM table does not have",
			"add an explicit PRIMARY KEY first, or run enginemig with a session that sets sql_generate_invisible_primary_key=OFF"))
	}
	return out
}

// isMerge: a MERGE table is refused by merge-member; other checks about its shape add nothing.
func isMerge(in *TableInput) bool {
	return in.Info != nil && strings.EqualFold(in.Info.Engine, "MRG_MyISAM")
}
