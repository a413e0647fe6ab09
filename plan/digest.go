package plan

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
)

// Digest is one normalised statement shape from performance_schema, with how often it ran since
// the server started (or the summary was truncated).
type Digest struct {
	Schema string // the session's default database when it ran ("" for none)
	Text   string // e.g. "SELECT COUNT ( * ) FROM `t`"
	Count  int64
}

// loadDigests reads the statement digest summary. Failures (no SELECT on performance_schema, the
// consumer disabled) leave DigestsAvailable false: the application checks then fall back to
// global status, and say so.
func (s *ServerInfo) loadDigests(ctx context.Context, q Querier) {
	var enabled string
	err := q.QueryRowContext(ctx, "SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'statements_digest'").Scan(&enabled)
	if err != nil || enabled != "YES" {
		return
	}
	rows, err := q.QueryContext(ctx, `SELECT SCHEMA_NAME, DIGEST_TEXT, COUNT_STAR
		FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST_TEXT IS NOT NULL`)
	if err != nil {
		return
	}
	defer rows.Close()
	var out []Digest
	for rows.Next() {
		var schema sql.NullString
		var d Digest
		if err := rows.Scan(&schema, &d.Text, &d.Count); err != nil {
			return
		}
		d.Schema = schema.String
		// A statement sent in a multi-statement batch keeps its ";" in the digest.
		d.Text = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(d.Text), ";"))
		out = append(out, d)
	}
	if rows.Err() == nil {
		s.Digests, s.DigestsAvailable = out, true
	}
}

// identRe matches one identifier in digest text: backquoted (with doubled backquotes) or bare.
const identRe = "(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"

// tableRefRe matches an optionally qualified table name at the start of a string.
var tableRefRe = regexp.MustCompile(`^(` + identRe + `)(?: \. (` + identRe + `))?`)

func unquoteIdent(s string) string {
	if strings.HasPrefix(s, "`") && strings.HasSuffix(s, "`") && len(s) >= 2 {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// refersTo parses a table reference at the start of s and reports whether it names schema.name,
// given the digest's default database. It returns the rest of s after the reference.
func refersTo(s, defaultSchema, schema, name string) (bool, string) {
	m := tableRefRe.FindStringSubmatchIndex(s)
	if m == nil {
		return false, s
	}
	first := unquoteIdent(s[m[2]:m[3]])
	refSchema, refName := defaultSchema, first
	if m[4] >= 0 {
		refSchema, refName = first, unquoteIdent(s[m[4]:m[5]])
	}
	// Table names compare case-sensitively on Linux (lower_case_table_names=0); digests keep
	// the case the application used, so a case-insensitive match is the safer error here.
	return refSchema == schema && strings.EqualFold(refName, name), strings.TrimSpace(s[m[1]:])
}

// digestsFor returns the digests for which match reports true, and their total count.
func digestsFor(ds []Digest, match func(Digest) bool) (n int, count int64) {
	for _, d := range ds {
		if match(d) {
			n++
			count += d.Count
		}
	}
	return n, count
}
