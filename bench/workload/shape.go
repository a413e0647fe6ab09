package workload

import (
	"fmt"
	"strings"
)

// What a statement's parameter is compared with, which decides how replay binds it.
const (
	ParamEq     = "eq"     // column = ?, column IN (...), SET column = ?: a value the column holds
	ParamLower  = "lower"  // column > ?, column >= ?, BETWEEN ? AND: a range's lower bound
	ParamUpper  = "upper"  // column < ?, column <= ?, BETWEEN .. AND ?: a range's upper bound
	ParamValue  = "value"  // VALUES (...) of an INSERT: the value of Column in a new row
	ParamLimit  = "limit"  // LIMIT ?
	ParamOffset = "offset" // OFFSET ?, LIMIT ?, ..
	ParamOther  = "other"  // anything else (arithmetic, functions): the example's literal or 1
)

// Param is one placeholder of a replayable statement.
type Param struct {
	Kind   string `json:"kind"`
	Column string `json:"column,omitempty"`
	// Example is the literal the example statement had here ("" when there is none).
	Example string `json:"example,omitempty"`
}

// Shape is a statement ready to prepare: SQL with one ? per Param, every table qualified.
type Shape struct {
	SQL    string
	Params []Param
}

// ShapeOptions are what ShapeOf needs besides the statement.
type ShapeOptions struct {
	// Columns are the captured table's columns, for an INSERT without a column list.
	Columns  []string
	ListSize ListSize
	// Table is the captured table; when Target is set, references to Table are replaced by it
	// (a scratch copy), aliased to the original name when columns are qualified with it.
	Table, Target TableName
}

// usedAsQualifier says "name ." qualifies a column somewhere outside the table references.
func usedAsQualifier(ts []token, refs map[int]tableRef, name string) bool {
	inRef := map[int]bool{}
	for _, r := range refs {
		for j := r.start; j < r.end; j++ {
			inRef[j] = true
		}
	}
	for i := 0; i+1 < len(ts); i++ {
		if !inRef[i] && (ts[i].kind == tokQuoted || ts[i].kind == tokWord) && strings.EqualFold(UnquoteIdent(ts[i].text), name) && ts[i+1].is(".") {
			return true
		}
	}
	return false
}

// aliased says the table reference ending before ts[end] has an alias.
func aliased(ts []token, end int) bool {
	if end >= len(ts) {
		return false
	}
	t := ts[end]
	return t.is("AS") || t.kind == tokQuoted || t.kind == tokWord && !t.is(clauseEnd...) && !t.is("JOIN", "INNER", "LEFT", "RIGHT", "CROSS", "NATURAL", "STRAIGHT_JOIN", "FORCE", "USE", "IGNORE", "PARTITION")
}

// ListSize decides how many values an IN (...) list gets: column is the compared column, example
// the size the example statement had (0 when there is none).
type ListSize func(column string, example int) int

// ShapeOf turns a statement's digest-like text into executable SQL with placeholders:
//   - unqualified tables are qualified with the statement's default database, so the statement
//     runs from any session (replay connections have none) and reads the same other tables;
//   - backquoted function names ("`CONCAT` (") lose their quotes, which would make them
//     stored-function calls;
//   - each (...) list of an IN becomes size(column, example) placeholders, of VALUES one per
//     inserted column (columns lists the table's columns for an INSERT without a column list).
//
// Each placeholder's Param says what it is compared with, so replay can bind it from the table.
func ShapeOf(st Statement, o ShapeOptions) (Shape, error) {
	columns, size := o.Columns, o.ListSize
	ts := tokenize(st.Text)
	var exParams []string
	var exLists []int
	if st.Example != "" {
		text, params, lists := Normalize(st.Example)
		if strings.Count(text, "?") == strings.Count(normalizedText(st.Text), "?") {
			exParams, exLists = params, lists
		}
	}
	refs := map[int]tableRef{}
	for _, r := range tableRefs(ts, st.Schema) {
		refs[r.start] = r
	}
	var out []string
	var params []Param
	nParam, nList := 0, 0
	replaced := false
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		if r, ok := refs[i]; ok {
			if o.Target.Name != "" && r.Schema == o.Table.Schema && strings.EqualFold(r.Name, o.Table.Name) {
				replaced = true
				out = append(out, quote(o.Target.Schema)+" . "+quote(o.Target.Name))
				if usedAsQualifier(ts, refs, r.Name) && !aliased(ts, r.end) {
					out = append(out, "AS", quote(r.Name))
				}
			} else if r.qualified || r.Schema == "" {
				out = append(out, join(ts[r.start:r.end]))
			} else {
				out = append(out, quote(r.Schema)+" . "+quote(r.Name))
			}
			i = r.end - 1
			continue
		}
		switch {
		case (t.kind == tokQuoted || t.kind == tokWord) && i+1 < len(ts) && ts[i+1].is("(") && !(i+2 < len(ts) && ts[i+2].is("...")):
			// Digests write "SUM ( x )"; without IGNORE_SPACE a space after an aggregate's
			// name makes it a stored-function call, so glue names to their parenthesis.
			out = append(out, UnquoteIdent(t.text)+"(")
			i++
		case t.is("(") && i+2 < len(ts) && ts[i+1].is("...") && ts[i+2].is(")"):
			example := 0
			if nList < len(exLists) {
				example = exLists[nList]
			}
			nList++
			ps, err := expandList(ts, i, columns, size, example)
			if err != nil {
				return Shape{}, err
			}
			params = append(params, ps...)
			out = append(out, "("+strings.TrimSuffix(strings.Repeat("?, ", len(ps)), ", ")+")")
			i += 2
		case t.kind == tokParam:
			p := paramAt(ts, i)
			if nParam < len(exParams) {
				p.Example = exParams[nParam]
			}
			nParam++
			params = append(params, p)
			out = append(out, "?")
		case t.is("..."):
			return Shape{}, fmt.Errorf("the statement text is truncated")
		default:
			out = append(out, t.text)
		}
	}
	if o.Target.Name != "" && !replaced {
		// Never run a statement that would touch the real table instead of the target.
		return Shape{}, fmt.Errorf("the statement does not name %s where it can be rewritten to the table under test", o.Table)
	}
	fixLimitOffset(ts, params)
	return Shape{SQL: strings.Join(out, " "), Params: params}, nil
}

// normalizedText is Normalize's text only, for comparing a digest with an example's shape.
func normalizedText(text string) string { t, _, _ := Normalize(text); return t }

func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// expandList makes the placeholders of the (...) at ts[open].
func expandList(ts []token, open int, columns []string, size ListSize, example int) ([]Param, error) {
	if open > 0 && ts[open-1].is("IN") {
		col := columnBefore(ts, open-1)
		if open > 1 && ts[open-2].is("NOT") {
			col = columnBefore(ts, open-2)
		}
		n := size(col, example)
		ps := make([]Param, max(n, 1))
		for i := range ps {
			ps[i] = Param{Kind: ParamEq, Column: col}
		}
		return ps, nil
	}
	if open > 0 && ts[open-1].is("VALUES", "VALUE") {
		cols := insertColumns(ts, open-1)
		if cols == nil {
			cols = columns
		}
		if len(cols) == 0 {
			return nil, fmt.Errorf("INSERT without a column list, and the table's columns are unknown")
		}
		ps := make([]Param, len(cols))
		for i, c := range cols {
			ps[i] = Param{Kind: ParamValue, Column: c}
		}
		return ps, nil
	}
	return nil, fmt.Errorf("a list of values (...) outside IN or VALUES")
}

// insertColumns reads the column list "( a , b )" that ends just before ts[values].
func insertColumns(ts []token, values int) []string {
	if values < 1 || !ts[values-1].is(")") {
		return nil
	}
	var cols []string
	for j := values - 2; j >= 0; j-- {
		switch t := ts[j]; {
		case t.is("("):
			for l, r := 0, len(cols)-1; l < r; l, r = l+1, r-1 {
				cols[l], cols[r] = cols[r], cols[l]
			}
			return cols
		case t.is(","):
		case t.kind == tokQuoted || t.kind == tokWord:
			cols = append(cols, UnquoteIdent(t.text))
		default:
			return nil
		}
	}
	return nil
}

// columnBefore is the column name ending at ts[end-1] ("col", "`t` . `col`"), "" when the operand
// is something else (a function, an expression).
func columnBefore(ts []token, end int) string {
	j := end - 1
	if j < 0 || !(ts[j].kind == tokQuoted || ts[j].kind == tokWord && !ts[j].is(keywords...)) {
		return ""
	}
	return UnquoteIdent(ts[j].text)
}

// keywords that can precede a comparison operator but are not columns.
var keywords = []string{"WHERE", "AND", "OR", "NOT", "ON", "SET", "SELECT", "HAVING", "WHEN", "THEN", "ELSE", "CASE", "BY", "LIMIT"}

// paramAt decides what the ? at ts[i] is compared with.
func paramAt(ts []token, i int) Param {
	prev := func(k int) token {
		if i-k < 0 {
			return token{}
		}
		return ts[i-k]
	}
	switch p := prev(1); {
	case p.is("=", "<=>", "!=", "<>"):
		return Param{Kind: ParamEq, Column: columnBefore(ts, i-1)}
	case p.is(">", ">="):
		return Param{Kind: ParamLower, Column: columnBefore(ts, i-1)}
	case p.is("<", "<="):
		return Param{Kind: ParamUpper, Column: columnBefore(ts, i-1)}
	case p.is("BETWEEN"):
		j := i - 1
		if prev(2).is("NOT") {
			j--
		}
		return Param{Kind: ParamLower, Column: columnBefore(ts, j)}
	case p.is("AND") && prev(2).kind == tokParam && prev(3).is("BETWEEN"):
		j := i - 3
		if prev(4).is("NOT") {
			j--
		}
		return Param{Kind: ParamUpper, Column: columnBefore(ts, j)}
	case p.is("LIMIT"):
		return Param{Kind: ParamLimit}
	case p.is("OFFSET"):
		return Param{Kind: ParamOffset}
	}
	return Param{Kind: ParamOther}
}

// fixLimitOffset turns "LIMIT ? , ?" (offset, count) into offset and limit parameters.
func fixLimitOffset(ts []token, params []Param) {
	k := 0
	for i, t := range ts {
		if t.kind == tokParam {
			if i >= 2 && ts[i-1].is(",") && ts[i-2].kind == tokParam && i >= 3 && ts[i-3].is("LIMIT") && k >= 1 {
				params[k-1].Kind, params[k].Kind = ParamOffset, ParamLimit
			}
			k++
		}
		if t.is("(") && i+2 < len(ts) && ts[i+1].is("...") {
			return // after a list the positions no longer line up; LIMIT x, y before a list is rare
		}
	}
}
