package workload

import (
	"regexp"
	"strings"
)

// Token kinds of statement text.
const (
	tokWord   = iota // keyword, bare identifier or function name
	tokQuoted        // `identifier`
	tokString        // 'string' or "string"
	tokNumber
	tokParam // ? (a digest's placeholder)
	tokPunct // operators and punctuation, "..." included
)

type token struct {
	kind int
	text string
}

// tokenize splits SQL (a digest's normalised text or a literal statement) into tokens, dropping
// comments. It never fails: unterminated quotes run to the end of the text.
func tokenize(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case strings.HasPrefix(s[i:], "-- ") || c == '#':
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return out
			}
			i += end + 1
		case c == '`' || c == '\'' || c == '"':
			j := quotedEnd(s, i)
			kind := tokString
			if c == '`' {
				kind = tokQuoted
			}
			out = append(out, token{kind, s[i:j]})
			i = j
		case c == '?':
			out = append(out, token{tokParam, "?"})
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i + 1
			for j < len(s) && (isWordByte(s[j]) || s[j] == '.' ||
				(s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.HasPrefix(s[i:], "0x")) {
				j++
			}
			out = append(out, token{tokNumber, s[i:j]})
			i = j
		case isWordByte(c):
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			// x'..', b'..', N'..' and _charset'..' are string literals.
			if j < len(s) && s[j] == '\'' {
				k := j + 1
				for k < len(s) && s[k] != '\'' {
					k++
				}
				k = min(k+1, len(s))
				out = append(out, token{tokString, s[i:k]})
				i = k
				continue
			}
			out = append(out, token{tokWord, s[i:j]})
			i = j
		default:
			n := 1
			for _, op := range []string{"...", "<=>", "<=", ">=", "<>", "!=", "||", "&&", ":=", "<<", ">>"} {
				if strings.HasPrefix(s[i:], op) {
					n = len(op)
					break
				}
			}
			out = append(out, token{tokPunct, s[i : i+n]})
			i += n
		}
	}
	return out
}

// quotedEnd returns the end of the quoted string or identifier starting at s[i] (past its closing
// quote; the end of s when it is unterminated).
func quotedEnd(s string, i int) int {
	c := s[i]
	j := i + 1
	for j < len(s) {
		if s[j] == '\\' && c != '`' {
			j += 2
			continue
		}
		if s[j] == c {
			if j+1 < len(s) && s[j+1] == c { // doubled quote
				j += 2
				continue
			}
			break
		}
		j++
	}
	return min(j+1, len(s))
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func join(ts []token) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.text
	}
	return strings.Join(parts, " ")
}

func (t token) is(words ...string) bool {
	if t.kind != tokWord && t.kind != tokPunct {
		return false
	}
	for _, w := range words {
		if strings.EqualFold(t.text, w) {
			return true
		}
	}
	return false
}

func (t token) literal() bool { return t.kind == tokString || t.kind == tokNumber }

// Normalize turns a literal statement (from a log file) into digest-like text: literals become ?,
// lists of literals in IN (...) and VALUES rows become (...) as performance_schema writes them,
// tokens are separated by single spaces. It also returns the literal of each ? in order, and the
// size of each collapsed list.
func Normalize(sql string) (text string, literals []string, lists []int) {
	ts := tokenize(sql)
	var out []token
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		if t.is("(") && i > 0 && (ts[i-1].is("IN") || ts[i-1].is("VALUES", "VALUE") || ts[i-1].is(",") && len(out) > 0 && inValues(out[:len(out)-1])) {
			if n, end := literalList(ts, i); n > 0 {
				lists = append(lists, n)
				if ts[i-1].is(",") { // a further VALUES row: digests keep only the first
					out = out[:len(out)-1]
				} else {
					out = append(out, token{tokPunct, "("}, token{tokPunct, "..."}, token{tokPunct, ")"})
				}
				i = end
				continue
			}
		}
		if t.literal() {
			literals = append(literals, t.text)
			t = token{tokParam, "?"}
		}
		out = append(out, t)
	}
	for len(out) > 0 && out[len(out)-1].is(";") {
		out = out[:len(out)-1]
	}
	return join(out), literals, lists
}

// inValues says the last output tokens are "VALUES ( ... )", so "," continues the row list.
func inValues(out []token) bool {
	n := len(out)
	return n >= 4 && out[n-1].is(")") && out[n-2].is("...") && out[n-3].is("(") && out[n-4].is("VALUES", "VALUE")
}

// literalList reports how many literals the parenthesised list at ts[open] holds, and where it
// closes, when it holds only literals (and signs); n is 0 otherwise.
func literalList(ts []token, open int) (n, end int) {
	for j := open + 1; j < len(ts); j++ {
		switch t := ts[j]; {
		case t.is(")"):
			return n, j
		case t.literal():
			n++
		case t.is(",", "-", "+") || t.is("NULL", "TRUE", "FALSE"):
			if t.is("NULL", "TRUE", "FALSE") {
				n++
			}
		default:
			return 0, 0
		}
	}
	return 0, 0
}

// identRe matches one identifier in digest text: backquoted (with doubled backquotes) or bare.
const identRe = "(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"

// TableRefRe matches an optionally qualified table name at the start of digest text.
var TableRefRe = regexp.MustCompile(`^(` + identRe + `)(?: \. (` + identRe + `))?`)

// UnquoteIdent removes an identifier's backquotes.
func UnquoteIdent(s string) string {
	if strings.HasPrefix(s, "`") && strings.HasSuffix(s, "`") && len(s) >= 2 {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// RefersTo parses a table reference at the start of s and reports whether it names schema.name,
// given the statement's default database. It returns the rest of s after the reference.
func RefersTo(s, defaultSchema, schema, name string) (bool, string) {
	m := TableRefRe.FindStringSubmatchIndex(s)
	if m == nil {
		return false, s
	}
	first := UnquoteIdent(s[m[2]:m[3]])
	refSchema, refName := defaultSchema, first
	if m[4] >= 0 {
		refSchema, refName = first, UnquoteIdent(s[m[4]:m[5]])
	}
	// Table names compare case-sensitively on Linux (lower_case_table_names=0); digests keep
	// the case the application used, so a case-insensitive match is the safer error here.
	return refSchema == schema && strings.EqualFold(refName, name), strings.TrimSpace(s[m[1]:])
}
