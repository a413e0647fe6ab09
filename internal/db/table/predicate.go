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

// afterKey is AfterPredicate with its arguments for the key value v, which may hold NULLs (a
// keyless table's chunk key may be NULLable; NULL sorts first in an index): a part that is NULL
// is spelled "IS NULL" for equal and "IS NOT NULL" for after, without an argument. Only keys
// with NULLs change the text.
//
// ph, when set, is the placeholder of each part ("?" or a CAST of it, see SQL.keyless).
func afterKey(quotedKey, ph []string, v []any) (string, []any) {
	if !slices.Contains(v, nil) && ph == nil {
		return AfterPredicate(quotedKey), AfterArgs(v)
	}
	p := func(j int) string {
		if ph == nil {
			return "?"
		}
		return ph[j]
	}
	terms := make([]string, len(quotedKey))
	var args []any
	for i := range quotedKey {
		parts := make([]string, 0, i+1)
		for j := 0; j <= i; j++ {
			switch {
			case j < i && v[j] == nil:
				parts = append(parts, quotedKey[j]+" IS NULL")
			case j < i:
				parts, args = append(parts, quotedKey[j]+" = "+p(j)), append(args, v[j])
			case v[j] == nil:
				parts = append(parts, quotedKey[j]+" IS NOT NULL")
			default:
				parts, args = append(parts, quotedKey[j]+" > "+p(j)), append(args, v[j])
			}
		}
		terms[i] = "(" + strings.Join(parts, " AND ") + ")"
	}
	return "(" + strings.Join(terms, " OR ") + ")", args
}
