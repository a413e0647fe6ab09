package plan

import (
	"fmt"
	"regexp"
)

// Statement findings: each of the application's statements on the table (from the digests) whose
// answer may change with the engine, listed by its text, one finding per statement. Whether it
// does change, `enginemig answers` finds out on copies of the table.

func init() {
	register(Check{ID: "limit-without-order-by", Severity: Warning, Scope: ScopeTable,
		What:  "a SELECT on the table with LIMIT but no ORDER BY: MyISAM returns the first rows of its data file, InnoDB the first in key order, so other rows can come back",
		table: checkLimitWithoutOrderBy})
	register(Check{ID: "fulltext-natural", Severity: Warning, Scope: ScopeTable,
		What:  "a natural-language MATCH ... AGAINST on the table: MyISAM's 50% threshold, stopwords, token sizes and relevance differ from InnoDB's",
		table: checkNaturalSearch})
}

var (
	digestLimitRe   = regexp.MustCompile(`(?i)\bLIMIT\b`)
	digestOrderRe   = regexp.MustCompile(`(?i)\bORDER BY\b`)
	digestMatchRe   = regexp.MustCompile(`(?i)\bMATCH \(.*?\) AGAINST \(([^)]*)\)`)
	digestBooleanRe = regexp.MustCompile(`(?i)\bIN BOOLEAN MODE\b`)
)

// selectsOn are the digests of SELECTs that read the table, as its own statements or in a join.
func (in *TableInput) selectsOn() []Digest {
	if in.Server == nil || in.Info == nil {
		return nil
	}
	return in.Server.readsOf(in.Info.Schema, in.Info.Name)
}

func checkLimitWithoutOrderBy(in *TableInput) []Finding {
	var out []Finding
	for _, d := range in.selectsOn() {
		if !digestLimitRe.MatchString(d.Text) || digestOrderRe.MatchString(d.Text) {
			continue
		}
		out = append(out, newFinding("limit-without-order-by", Warning,
			fmt.Sprintf("%q ran %d time(s): LIMIT without ORDER BY returns MyISAM's first rows in data-file order, InnoDB's in key order", d.Text, d.Count),
			"add an ORDER BY that says which rows the application wants; `enginemig answers` shows whether the rows change"))
	}
	return out
}

func checkNaturalSearch(in *TableInput) []Finding {
	var out []Finding
	for _, d := range in.selectsOn() {
		m := digestMatchRe.FindStringSubmatch(d.Text)
		if m == nil || digestBooleanRe.MatchString(m[1]) {
			continue
		}
		out = append(out, newFinding("fulltext-natural", Warning,
			fmt.Sprintf("%q ran %d time(s): a natural-language search returns other rows on InnoDB (no 50%% threshold, other stopwords and token sizes) ranked by other scores", d.Text, d.Count),
			"`enginemig answers` shows which searches change and why; search IN BOOLEAN MODE where the threshold mattered"))
	}
	return out
}
