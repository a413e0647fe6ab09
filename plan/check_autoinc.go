package plan

import (
	"fmt"
	"strings"
)

func init() {
	registerTable("autoinc-not-leading", Blocker,
		"the AUTO_INCREMENT column is not the first column of any index (MyISAM per-group sequences; InnoDB error 1075)",
		checkAutoincLeading)
	registerTable("autoinc-reuse", Warning,
		"before MySQL 8.0 / MariaDB 10.2.4 InnoDB resets AUTO_INCREMENT to MAX+1 on restart, so deleted ids can be reused",
		checkAutoincReuse)
}

func autoincColumn(in *TableInput) string {
	if in.Info == nil {
		return ""
	}
	c, _ := in.Info.AutoIncrementColumn()
	return c.Name
}

func checkAutoincLeading(in *TableInput) []Finding {
	col := autoincColumn(in)
	if col == "" {
		return nil
	}
	for _, ix := range in.Info.Indexes {
		if len(ix.Columns) > 0 && strings.EqualFold(ix.Columns[0].Name, col) && ix.Type != "FULLTEXT" {
			return nil
		}
	}
	return []Finding{newFinding("autoinc-not-leading", Blocker,
		fmt.Sprintf("AUTO_INCREMENT column %s is not the first column of any index: MyISAM numbers it per group of the leading columns, InnoDB refuses the table (error 1075)", col),
		fmt.Sprintf("decide how ids should be numbered: either add KEY (%s) (ids become globally unique and increasing, which changes what the application sees) or generate the per-group number in the application; then plan again", col))}
}

func checkAutoincReuse(in *TableInput) []Finding {
	if autoincColumn(in) == "" || in.Server == nil || !autoincResetsOnRestart(in.Server) {
		return nil
	}
	return []Finding{newFinding("autoinc-reuse", Warning,
		fmt.Sprintf("%s %s resets an InnoDB AUTO_INCREMENT counter to MAX(id)+1 when the server restarts: ids of deleted newest rows can be handed out again (MyISAM never reuses them)", in.Server.Flavor, in.Server.Version),
		"upgrade to MySQL 8.0+ / MariaDB 10.2.4+, or make sure no other table or system keeps ids of deleted rows")}
}

// autoincResetsOnRestart: persistent AUTO_INCREMENT arrived in MariaDB 10.2.4 and MySQL 8.0.0.
func autoincResetsOnRestart(s *ServerInfo) bool {
	if s.MariaDB() {
		return !s.AtLeast(10, 2, 4)
	}
	return !s.AtLeast(8, 0, 0)
}
