package bench

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Template is a user statement added to the mix (--query 'weight:SQL') or run by a background
// client in a loop (--background 'SQL'). Production mixes are rarely primary-key only, and a
// single report scan is what makes MyISAM collapse, so users must be able to add their own.
//
// The statement names the benchmarked table either as {table} or by its name after FROM, JOIN,
// UPDATE or INTO (optionally schema-qualified); each run rewrites that to the table under test
// (a scratch copy, the shadow, ...). Each ? gets a value from the table's key range: the first a
// random key k, the next ones k+KeySpan, k+2*KeySpan, ... so `BETWEEN ? AND ?` reads a range.
type Template struct {
	Name   string `json:"name"`
	Weight int    `json:"weight,omitempty"`
	SQL    string `json:"sql"`
}

// KeySpan is the distance between consecutive ? values of a template.
const KeySpan = 100

// ParseQuery reads 'weight:SQL'.
func ParseQuery(spec string, n int) (Template, error) {
	w, q, ok := strings.Cut(spec, ":")
	weight, err := strconv.Atoi(strings.TrimSpace(w))
	if !ok || err != nil || weight <= 0 {
		return Template{}, fmt.Errorf("query %q: want 'weight:SQL' with a positive integer weight, e.g. '2:SELECT * FROM t WHERE id BETWEEN ? AND ?'", spec)
	}
	q = strings.TrimSpace(q)
	if q == "" {
		return Template{}, fmt.Errorf("query %q: empty statement", spec)
	}
	return Template{Name: fmt.Sprintf("query%d", n), Weight: weight, SQL: q}, nil
}

// ParseQueries parses several 'weight:SQL' specs, naming them query1, query2, ...
func ParseQueries(specs []string) ([]Template, error) {
	var out []Template
	for i, s := range specs {
		t, err := ParseQuery(s, i+1)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// ParseBackground names background statements report1, report2, ...
func ParseBackground(specs []string) ([]Template, error) {
	var out []Template
	for i, s := range specs {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("background query %d is empty", i+1)
		}
		out = append(out, Template{Name: fmt.Sprintf("report%d", i+1), SQL: s})
	}
	return out, nil
}

// ReadOnly reports whether the statement only reads: live tables only get such probes.
func (t Template) ReadOnly() bool {
	s := strings.ToUpper(strings.TrimSpace(stripLeadingComments(t.SQL)))
	if !strings.HasPrefix(s, "SELECT") && !strings.HasPrefix(s, "WITH") {
		return false
	}
	// SELECT ... INTO writes a file or variables; FOR UPDATE / LOCK IN SHARE MODE take write-ish locks.
	for _, bad := range []string{" INTO ", "FOR UPDATE", "LOCK IN SHARE MODE", "FOR SHARE"} {
		if strings.Contains(s, bad) {
			return false
		}
	}
	return true
}

func stripLeadingComments(s string) string {
	for {
		s = strings.TrimSpace(s)
		switch {
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s, "*/")
			if end < 0 {
				return s
			}
			s = s[end+2:]
		case strings.HasPrefix(s, "--"), strings.HasPrefix(s, "#"):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return ""
			}
			s = s[end+1:]
		default:
			return s
		}
	}
}

// Params counts the ? placeholders outside quoted strings and identifiers.
func (t Template) Params() int {
	n := 0
	var quote byte
	for i := 0; i < len(t.SQL); i++ {
		c := t.SQL[i]
		switch {
		case quote != 0:
			if c == '\\' && quote != '`' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '?':
			n++
		}
	}
	return n
}

// Bind returns the statement with its table reference rewritten to schema.table, the table under
// test. ref is the table name the user wrote statements against (refSchema may match a qualifier).
func (t Template) Bind(refSchema, ref, schema, table string) (string, error) {
	target := dbconn.QualifiedName(schema, table)
	if strings.Contains(t.SQL, "{table}") {
		return strings.ReplaceAll(t.SQL, "{table}", target), nil
	}
	name := identPattern(ref)
	qual := `(?:` + identPattern(refSchema) + `\s*\.\s*)?`
	re, err := regexp.Compile(`(?i)\b(FROM|JOIN|UPDATE|INTO)(\s+)` + qual + name + `(\s|$|,|;|\))`)
	if err != nil {
		return "", fmt.Errorf("%s: %w", t.Name, err)
	}
	if !re.MatchString(t.SQL) {
		return "", fmt.Errorf("%s %q does not refer to table %s: write {table} (or FROM %s) where the benchmarked table goes",
			t.Name, t.SQL, ref, ref)
	}
	return re.ReplaceAllString(t.SQL, "${1}${2}"+strings.ReplaceAll(target, "$", "$$")+"${3}"), nil
}

// identPattern matches name quoted with backticks, or bare when it is a plain word.
func identPattern(name string) string {
	quoted := regexp.QuoteMeta(dbconn.QuoteIdent(name))
	if regexp.MustCompile(`^\w+$`).MatchString(name) {
		return `(?:` + quoted + `|` + regexp.QuoteMeta(name) + `\b)`
	}
	return quoted
}
