package plan

import (
	"fmt"
	"slices"
	"strings"
)

func init() {
	registerTable("triggers", Blocker, "the table has triggers: apply carries them to the InnoDB table inside the cut-over (same names, order, body, definer and context); blocks only triggers it cannot create again faithfully", checkTriggers)
	registerTable("partitioned", Warning, "partitioned MyISAM table (blocker on MySQL 8.0+, which has no partitioned MyISAM)", checkPartitioned)
	registerTable("foreign-keys", Info, "foreign keys of other tables point at this table: InnoDB starts enforcing them once both sides are InnoDB", checkForeignKeys)
}

func checkTriggers(in *TableInput) []Finding {
	if len(in.Triggers) == 0 {
		return nil
	}
	var names, definers []string
	for _, tr := range in.Triggers {
		if why := tr.Carryable(in.Info.Schema, in.Info.Name); why != "" {
			return []Finding{newFinding("triggers", Blocker, why+": apply cannot create it again byte for byte",
				"recreate the trigger from a utf8mb4 session (SHOW CREATE TRIGGER gives its text), or drop it, convert, and create it again")}
		}
		names = append(names, tr.Name)
		definers = append(definers, tr.Definer)
	}
	slices.Sort(definers)
	return []Finding{newFinding("triggers", Info,
		fmt.Sprintf("%d trigger(s) (%s) are carried to the InnoDB table inside the cut-over: same names, order, body, DEFINER (%s), sql_mode and character set; neither the copy nor the replay fires them",
			len(names), strings.Join(names, ", "), strings.Join(slices.Compact(definers), ", ")),
		"the account needs TRIGGER on the table, and SUPER (MariaDB: SET USER) to create a trigger for another DEFINER; each DEFINER must see the table's triggers (TRIGGER privilege) for the few milliseconds after the swap")}
}

func checkPartitioned(in *TableInput) []Finding {
	if in.Partitions == 0 {
		return nil
	}
	if in.Server != nil && !in.Server.MariaDB() && in.Server.AtLeast(8, 0, 0) {
		return []Finding{newFinding("partitioned", Blocker,
			fmt.Sprintf("partitioned MyISAM table (%d partitions): MySQL 8.0+ does not support it", in.Partitions),
			"convert it on the server it came from (5.7) or remove partitioning first")}
	}
	return []Finding{newFinding("partitioned", Warning,
		fmt.Sprintf("partitioned table (%d partitions): every partition becomes InnoDB; the copy walks the key across partitions", in.Partitions),
		"check that the partitioning expression is valid for InnoDB (the test-compile does) and that partition maintenance jobs still work")}
}

func checkForeignKeys(in *TableInput) []Finding {
	if len(in.ReferencedBy) == 0 {
		return nil
	}
	return []Finding{newFinding("foreign-keys", Info,
		fmt.Sprintf("referenced by foreign key(s) %s: while this table is MyISAM, InnoDB cannot see its rows, so with foreign_key_checks on every insert into those children fails (error 1452)", strings.Join(in.ReferencedBy, ", ")),
		"after conversion InnoDB enforces them: look for orphan rows first; InnoDB refuses new foreign keys to a MyISAM parent, so convert parents before children")}
}
