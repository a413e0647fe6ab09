package plan

import (
	"fmt"
	"strings"
)

func init() {
	registerTable("triggers", Blocker, "the table has triggers: they would stay with the renamed old table at cut-over, and apply does not yet recreate them inside the swap", checkTriggers)
	registerTable("partitioned", Warning, "partitioned MyISAM table (blocker on MySQL 8.0+, which has no partitioned MyISAM)", checkPartitioned)
	registerTable("foreign-keys", Info, "foreign keys of other tables point at this table: InnoDB starts enforcing them once both sides are InnoDB", checkForeignKeys)
}

func checkTriggers(in *TableInput) []Finding {
	if len(in.Triggers) == 0 {
		return nil
	}
	return []Finding{newFinding("triggers", Blocker,
		fmt.Sprintf("%d trigger(s) (%s): at cut-over they would follow the renamed MyISAM table; apply does not recreate them on the InnoDB table yet", len(in.Triggers), strings.Join(in.Triggers, ", ")),
		"drop the triggers, convert, then recreate them on the new table (the application's writes in between are not seen by them)")}
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
		fmt.Sprintf("referenced by foreign key(s) %s, created while this table was MyISAM (not enforced so far)", strings.Join(in.ReferencedBy, ", ")),
		"after conversion InnoDB enforces them: look for orphan rows first; InnoDB refuses new foreign keys to a MyISAM parent, so convert parents before children")}
}
