package table

import (
	"slices"
	"strings"
)

// AfterPredicate is "key > (?,...)" for a key of the given (quoted) columns, spelled as OR-ed
// comparisons, which every server's range optimizer uses (row-constructor comparisons are not
// optimised everywhere): a > ? OR (a = ? AND b > ?) OR ... Arguments come from AfterArgs.
func AfterPredicate(quotedKey []string) string {
	terms := make([]string, len(quotedKey))
	for i := range quotedKey {
		parts := make([]string, 0, i+1)
		for j := 0; j < i; j++ {
			parts = append(parts, quotedKey[j]+" = ?")
		}
		parts = append(parts, quotedKey[i]+" > ?")
		terms[i] = "(" + strings.Join(parts, " AND ") + ")"
	}
	return "(" + strings.Join(terms, " OR ") + ")"
}

// AfterArgs expands a key's values to AfterPredicate's placeholders.
func AfterArgs(key []any) []any {
	var args []any
	for i := range key {
		args = append(args, key[:i+1]...)
	}
	return args
}

// afterKey is AfterPredicate with its arguments for the key value v, for a keyless table's
// chunk key, whose parts may be NULLable (NULL sorts first in an index) and DECIMAL. A NULL part
// of v is spelled "IS NULL" for equal and "IS NOT NULL" for after, without an argument. A
// NULLable column is compared so that a NULL in it makes a term false, never NULL: "NOT after"
// (the upper end of a range) must hold for a row whose key part is NULL. ph is the placeholder
// of each part ("?" or a CAST of it, see SQL.keyless); nil ph and nullable: the plain form.
func afterKey(quotedKey, ph []string, nullable []bool, v []any) (string, []any) {
	if ph == nil && !slices.Contains(nullable, true) {
		return AfterPredicate(quotedKey), AfterArgs(v)
	}
	terms := make([]string, len(quotedKey))
	var args []any
	for i := range quotedKey {
		parts := make([]string, 0, i+1)
		for j := 0; j <= i; j++ {
			k, null := quotedKey[j], nullable != nil && nullable[j]
			switch {
			case j < i && v[j] == nil:
				parts = append(parts, k+" IS NULL")
			case j < i && null:
				parts, args = append(parts, k+" <=> "+ph[j]), append(args, v[j])
			case j < i:
				parts, args = append(parts, k+" = "+ph[j]), append(args, v[j])
			case v[j] == nil:
				parts = append(parts, k+" IS NOT NULL")
			case null:
				parts, args = append(parts, k+" IS NOT NULL AND "+k+" > "+ph[j]), append(args, v[j])
			default:
				parts, args = append(parts, k+" > "+ph[j]), append(args, v[j])
			}
		}
		terms[i] = "(" + strings.Join(parts, " AND ") + ")"
	}
	return "(" + strings.Join(terms, " OR ") + ")", args
}
