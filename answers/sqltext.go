package answers

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/enginemig/enginemig/bench/workload"
)

// What the check reads from a statement's text. Plain patterns, not a parser: a statement they
// misread is still compared; only the words of its cause may be less precise.
var (
	orderByRe = regexp.MustCompile(`(?i)\bORDER\s+BY\b`)
	limitRe   = regexp.MustCompile(`(?i)\bLIMIT\s+\d`)
	matchRe   = regexp.MustCompile(`(?is)\bMATCH\s*\(([^)]*)\)\s*AGAINST\s*\(\s*'((?:[^'\\]|\\.|'')*)'\s*(IN\s+BOOLEAN\s+MODE|IN\s+NATURAL\s+LANGUAGE\s+MODE|WITH\s+QUERY\s+EXPANSION)?`)
	wordRe    = regexp.MustCompile(`[\pL\pN_']+`)
)

// search is one MATCH ... AGAINST of a statement.
type search struct {
	columns string
	query   string
	boolean bool
}

// shape is what decides how a statement's answers are compared and explained.
type shape struct {
	orderBy, limit bool
	searches       []search
}

func shapeOf(stmt string) shape {
	s := shape{orderBy: orderByRe.MatchString(stmt), limit: limitRe.MatchString(stmt)}
	for _, m := range matchRe.FindAllStringSubmatch(stmt, -1) {
		s.searches = append(s.searches, search{columns: m[1], query: strings.ReplaceAll(m[2], "''", "'"),
			boolean: strings.Contains(strings.ToUpper(m[3]), "BOOLEAN")})
	}
	return s
}

// words are a search's words, lowercased, without boolean operators.
func (s search) words() []string {
	var out []string
	for _, w := range wordRe.FindAllString(strings.ToLower(s.query), -1) {
		if w = strings.Trim(w, "'"); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// Digest names a statement's shape: the same for every statement that differs only in its
// literals, so that accepting one accepts its kind (the file of accepted digests).
func Digest(stmt string) string {
	text, _, _ := workload.Normalize(stmt)
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:8])
}
