package workload

import (
	"regexp"
	"strings"
)

// TableName is a table a statement refers to.
type TableName struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
}

func (t TableName) String() string { return t.Schema + "." + t.Name }

// tableRef is one table reference in a token list: the tokens [start, end) name it.
type tableRef struct {
	TableName
	start, end int
	qualified  bool
}

// clauseEnd are the words after which a FROM list's commas no longer separate tables.
var clauseEnd = []string{"WHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "ON", "USING", "SET", "UNION",
	"VALUES", "VALUE", "SELECT", "FOR", "LOCK", "WINDOW", "PROCEDURE", "INTO", "STRAIGHT_JOIN"}

// tableRefs finds the table references of a statement: the names after FROM, JOIN, UPDATE, INTO,
// TABLE and TABLES, and after the commas of a FROM list (old-style joins).
func tableRefs(ts []token, defaultSchema string) []tableRef {
	var refs []tableRef
	inList := false // inside a FROM or UPDATE table list, where "," introduces another table
	depth, listDepth := 0, 0
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		switch {
		case t.is("("):
			depth++
			continue
		case t.is(")"):
			depth--
			if depth < listDepth {
				inList = false
			}
			continue
		}
		after := t.is("FROM", "JOIN", "INTO", "TABLE", "TABLES") || t.is("UPDATE") && (i == 0 || !ts[i-1].is("KEY", "FOR"))
		if inList && depth == listDepth && t.is(",") {
			after = true
		}
		if inList && depth == listDepth && t.is(clauseEnd...) {
			inList = false
		}
		if !after {
			continue
		}
		if t.is("FROM", "UPDATE") {
			inList, listDepth = true, depth
		}
		if r, ok := refAt(ts, i+1, defaultSchema); ok {
			refs = append(refs, r)
			i = r.end - 1
		}
	}
	return refs
}

// refAt parses an optionally qualified table name at ts[i].
func refAt(ts []token, i int, defaultSchema string) (tableRef, bool) {
	ident := func(j int) bool {
		return j < len(ts) && (ts[j].kind == tokQuoted || ts[j].kind == tokWord && !ts[j].is(reserved...))
	}
	if !ident(i) {
		return tableRef{}, false
	}
	if i+2 < len(ts) && ts[i+1].is(".") && ident(i+2) {
		return tableRef{TableName: TableName{UnquoteIdent(ts[i].text), UnquoteIdent(ts[i+2].text)}, start: i, end: i + 3, qualified: true}, true
	}
	return tableRef{TableName: TableName{defaultSchema, UnquoteIdent(ts[i].text)}, start: i, end: i + 1}, true
}

// reserved words that can follow FROM/INTO/JOIN but are not table names.
var reserved = []string{"SELECT", "DUAL", "LATERAL", "IGNORE", "LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "QUICK",
	"OUTFILE", "DUMPFILE", "@", "JSON_TABLE"}

// Tables lists the distinct tables a statement's text refers to.
func Tables(text, defaultSchema string) []TableName {
	var out []TableName
	seen := map[TableName]bool{}
	for _, r := range tableRefs(tokenize(text), defaultSchema) {
		k := TableName{r.Schema, strings.ToLower(r.Name)}
		if !seen[k] {
			seen[k] = true
			out = append(out, r.TableName)
		}
	}
	return out
}

// Kind is the statement's first keyword, upper-cased (SELECT, UPDATE, INSERT, ...).
func Kind(text string) string {
	for _, t := range tokenize(text) {
		if t.is("(") {
			continue
		}
		return strings.ToUpper(t.text)
	}
	return ""
}

// ReadOnly says the statement only reads: a SELECT (or WITH) without INTO or locking clauses.
func ReadOnly(text string) bool {
	k := Kind(text)
	if k != "SELECT" && k != "WITH" {
		return false
	}
	ts := tokenize(text)
	for i, t := range ts {
		if t.is("INTO") || t.is("FOR") && i+1 < len(ts) && ts[i+1].is("UPDATE", "SHARE") || t.is("LOCK") && i+1 < len(ts) && ts[i+1].is("IN") {
			return false
		}
	}
	return true
}

// ownReadRe: enginemig's own reads of a table (copy chunks, checksums, samples) all name their
// index with FORCE INDEX.
var ownReadRe = regexp.MustCompile(`(?i)\bFORCE\s+INDEX\b`)

// OwnRead reports a statement (literal or digest text) shaped like enginemig's own reads, which
// the statement history holds beside the application's: they are left out of what is checked as
// the application's (an application's own FORCE INDEX statement is then missed, unless given in a
// file).
func OwnRead(text string) bool { return ownReadRe.MatchString(text) }
