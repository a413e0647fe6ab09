package dbconn

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// unquoteIdent parses s as exactly one backquoted MySQL identifier: an opening backtick, then
// characters where a backtick only appears doubled, then the closing backtick and nothing after
// it. It reports false when s is anything else (an unbalanced quote would let the rest of the
// name escape into the statement).
func unquoteIdent(s string) (string, bool) {
	if len(s) < 2 || s[0] != '`' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '`' {
			b.WriteByte(s[i])
			continue
		}
		if i == len(s)-1 {
			return b.String(), true // the closing quote, last byte
		}
		if s[i+1] != '`' {
			return "", false // the identifier would end here, with text after it
		}
		b.WriteByte('`')
		i++
	}
	return "", false // never closed
}

// FuzzQuoteIdent: whatever the name, QuoteIdent's output is one backquoted identifier that
// stands for exactly that name, and QualifiedName is two of them joined by one dot.
// Run it with: go test ./internal/db/dbconn -fuzz FuzzQuoteIdent -fuzztime 1m
func FuzzQuoteIdent(f *testing.F) {
	f.Add("t")
	f.Add("a`b")
	f.Add("`")
	f.Add("``")
	f.Add("x` ; DROP TABLE t; -- ")
	f.Fuzz(func(t *testing.T, name string) {
		q := QuoteIdent(name)
		got, ok := unquoteIdent(q)
		if !ok || got != name {
			t.Fatalf("QuoteIdent(%q) = %s parses as (%q, %v)", name, q, got, ok)
		}
		qn := QualifiedName(name, name)
		if qn != q+"."+q {
			t.Fatalf("QualifiedName(%q, %q) = %s", name, name, qn)
		}
		if a, ok := unquoteIdent(qn[:len(q)]); !ok || a != name {
			t.Fatalf("QualifiedName's schema part does not parse alone: %s", qn)
		}
	})
}

// mysqlIdentifier reports whether MariaDB accepts name as a table name at all: 1 to 64
// characters of the Basic Multilingual Plane, no NUL, not ending in a space.
func mysqlIdentifier(name string) bool {
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > 64 || strings.HasSuffix(name, " ") {
		return false
	}
	for _, r := range name {
		if r == 0 || r > 0xFFFF {
			return false
		}
	}
	return true
}

// fuzzSeeds reads the string values of a `go test -fuzz` corpus directory.
func fuzzSeeds(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "string(") && strings.HasSuffix(line, ")") {
				s, err := strconv.Unquote(line[len("string(") : len(line)-1])
				if err != nil {
					t.Fatalf("%s: %v", e.Name(), err)
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// The fuzz corpus's names against a real server: a table created with the quoted name shows up
// in information_schema under exactly that name, and selecting from it with the quoted name
// works (so the quoting never produced a different, or a second, identifier).
func TestQuoteIdentCorpusOnServer(t *testing.T) {
	seeds := fuzzSeeds(t, filepath.Join("testdata", "fuzz", "FuzzQuoteIdent"))
	if len(seeds) < 10 {
		t.Fatalf("only %d seeds in the corpus", len(seeds))
	}
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	root, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sandboxtest.MustExec(t, root, "SET NAMES utf8mb4")
	const schema = "quote test `db` ü"
	sandboxtest.MustExec(t, root, "CREATE DATABASE "+QuoteIdent(schema))
	tried := 0
	for _, name := range seeds {
		if !mysqlIdentifier(name) {
			continue
		}
		tried++
		if _, err := root.Exec("CREATE TABLE " + QualifiedName(schema, name) + " (id INT PRIMARY KEY) ENGINE=MyISAM"); err != nil {
			t.Errorf("CREATE TABLE %s: %v", QualifiedName(schema, name), err)
			continue
		}
		var got string
		if err := root.QueryRow("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", schema, name).Scan(&got); err != nil || got != name {
			t.Errorf("table %q: information_schema has %q (%v)", name, got, err)
		}
		var n int
		if err := root.QueryRow("SELECT COUNT(*) FROM " + QualifiedName(schema, name)).Scan(&n); err != nil {
			t.Errorf("SELECT from %s: %v", QualifiedName(schema, name), err)
		}
		if _, err := root.Exec("DROP TABLE " + QualifiedName(schema, name)); err != nil {
			t.Errorf("DROP TABLE %s: %v", QualifiedName(schema, name), err)
		}
	}
	var left int
	root.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=?", schema).Scan(&left)
	if left != 0 {
		t.Errorf("%d tables left: a quoted name created some other table", left)
	}
	t.Logf("%d of %d corpus names are valid MariaDB table names and round-tripped", tried, len(seeds))
}
