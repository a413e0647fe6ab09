package plan

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// TestFixtures runs every testdata/plan/<check-id>.sql: each hit_* table must get a finding of
// that check, each ok_* table must not.
func TestFixtures(t *testing.T) {
	files, err := filepath.Glob("../testdata/plan/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		id := strings.TrimSuffix(filepath.Base(file), ".sql")
		t.Run(id, func(t *testing.T) {
			if _, ok := registry[id]; !ok {
				t.Fatalf("fixture %s names no registered check", file)
			}
			sqlText, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			schema, db := sandboxtest.FreshDatabase(t, srv)
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			runScript(t, db, strings.ReplaceAll(string(sqlText), "@@TMPDIR@@", dir))
			p := inspect(t, db, Options{Databases: []string{schema}, TestCompile: true})
			hits, oks := 0, 0
			for _, tp := range p.Tables {
				f, found := hasCheck(tp.Findings, id)
				switch {
				case strings.HasPrefix(tp.Table, "hit_"):
					hits++
					if !found {
						t.Errorf("%s: no %s finding; got %v", tp.Table, id, tp.Findings)
					} else if f.Message == "" || (f.Severity != Info && f.Remedy == "") {
						t.Errorf("%s: finding without message or remedy: %+v", tp.Table, f)
					}
				case strings.HasPrefix(tp.Table, "ok_"):
					oks++
					if found {
						t.Errorf("%s: unexpected %s finding: %+v", tp.Table, id, f)
					}
				}
				if strings.HasPrefix(tp.Table, "_enginemig_plan_") {
					t.Errorf("scratch table %s left behind", tp.Table)
				}
			}
			if hits == 0 || oks == 0 {
				t.Fatalf("fixture must plan at least one hit_ and one ok_ table (got %d, %d): %+v", hits, oks, p.Skipped)
			}
		})
	}
}

// runScript runs a fixture statement by statement on one session, as an application would send
// them (performance_schema digests a multi-statement batch as one statement).
func runScript(t *testing.T, db *sql.DB, script string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, stmt := range splitStatements(script) {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// splitStatements splits on semicolons outside quotes and drops "--" comment lines.
func splitStatements(script string) []string {
	var lines []string
	for _, l := range strings.Split(script, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	var out []string
	var cur strings.Builder
	var quote rune
	for _, r := range strings.Join(lines, "\n") {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '`' || r == '"'):
			quote = r
		case quote == 0 && r == ';':
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, s)
			}
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
