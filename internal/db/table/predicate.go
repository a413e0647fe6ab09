package table

import "strings"

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
