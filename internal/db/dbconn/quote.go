package dbconn

import "strings"

// QuoteIdent quotes a MySQL identifier with backticks, doubling any backtick inside it, so any
// name (spaces, keywords, unicode, backticks) is safe to put in SQL text.
func QuoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// QualifiedName is `schema`.`table`.
func QualifiedName(schema, table string) string {
	return QuoteIdent(schema) + "." + QuoteIdent(table)
}

// QuoteString quotes a string literal for the rare statements that cannot take parameters
// (e.g. SHOW ... LIKE on some servers); backslashes and quotes are escaped.
func QuoteString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)
	return "'" + r.Replace(s) + "'"
}
