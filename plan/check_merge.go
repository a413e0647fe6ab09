package plan

import (
	"fmt"
	"strings"
)

func init() {
	registerTable("merge-member", Blocker,
		"the table is a member of a MERGE (MRG_MyISAM) table, or is one: queries on the MERGE table fail once a member is InnoDB",
		checkMerge)
}

func checkMerge(in *TableInput) []Finding {
	var out []Finding
	if len(in.MergeParents) > 0 {
		out = append(out, newFinding("merge-member", Blocker,
			fmt.Sprintf("member of MERGE table %s: once this table is InnoDB, every query on the MERGE table fails", strings.Join(in.MergeParents, ", ")),
			"replace the MERGE table first (a view with UNION ALL, or partitioning), or convert the whole set together outside enginemig"))
	}
	if in.Info != nil && strings.EqualFold(in.Info.Engine, "MRG_MyISAM") {
		out = append(out, newFinding("merge-member", Blocker,
			fmt.Sprintf("this is a MERGE table over %s: it has no rows of its own and cannot become InnoDB", strings.Join(in.MergeUnion, ", ")),
			"replace it with a view (SELECT ... UNION ALL ...) or a partitioned table before converting its members"))
	}
	return out
}
