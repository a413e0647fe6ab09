package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/plan"
)

// runPlanCLI runs `enginemig plan` in-process (see runCLI).
func runPlanCLI(t *testing.T, args ...string) (string, outcome.Code) {
	t.Helper()
	return runCLI(t, append([]string{"plan"}, args...)...)
}

// TestPlanCommand drives `enginemig plan` against one sandbox server: exit codes, the text
// report, JSON output and the plan file apply reads.
func TestPlanCommand(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE players (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, coins INT NOT NULL, KEY (coins)) ENGINE=MyISAM",
		"INSERT INTO players (coins) SELECT seq FROM "+sandboxtest.Seq(3000),
		"CREATE TABLE scores (grp INT NOT NULL, n INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (grp, n)) ENGINE=MyISAM",
		"CREATE TABLE sessions (id INT PRIMARY KEY) ENGINE=InnoDB")
	empty := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root", "--ssl-mode", "DISABLED"}
	with := func(extra ...string) []string { return append(append([]string{}, conn...), extra...) }

	t.Run("clean table exits 0", func(t *testing.T) {
		out, code := runPlanCLI(t, with("--database", schema, "--tables", "play*")...)
		if code != outcome.OK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		for _, want := range []string{schema + ".players", "3000", "No blockers"} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("blocker exits 4 and writes the plan file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "plan.json")
		out, code := runPlanCLI(t, with("-d", schema, "--tables", "players,scores,sessions", "--out", path)...)
		if code != outcome.Refused {
			t.Fatalf("exit %d, want %d\n%s", code, outcome.Refused, out)
		}
		if !strings.Contains(out, "!! BLOCKER") || !strings.Contains(out, "autoinc-not-leading") || !strings.Contains(out, "skipped "+schema+".sessions") {
			t.Errorf("report:\n%s", out)
		}
		p, err := plan.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		scores, ok := p.Table(schema, "scores")
		if !ok || !scores.Blocked || p.Summary.Blockers == 0 {
			t.Fatalf("plan file: %+v", p.Tables)
		}
		players, _ := p.Table(schema, "players")
		if players.Blocked || players.Rows != 3000 || players.Estimate.CopySeconds <= 0 || players.Estimate.SampleRows == 0 || players.CopyKey != "PRIMARY" {
			t.Fatalf("players: %+v", players)
		}
	})
	t.Run("markdown report for the change ticket", func(t *testing.T) {
		out, code := runPlanCLI(t, with("-d", schema, "--tables", "players,scores", "--output", "markdown")...)
		if code != outcome.Refused {
			t.Fatalf("exit %d, want %d\n%s", code, outcome.Refused, out)
		}
		// Each section, in order, and what it must say about this database.
		at := 0
		for _, want := range []string{"# MyISAM to InnoDB: " + schema, "## Summary", "| tables | 2 (1 blocked) |", "| rows | 3000 |",
			"## Tables, in the order apply converts them", "| 1 | `" + schema + ".", "## Blockers", "`autoinc-not-leading`", "*Remedy:*",
			"## Statements whose answers may change", "## Rolling back", "enginemig rollback -D " + schema + " -t players",
			"## Afterwards: keeping MyISAM out", "`enforce_storage_engine`"} {
			if srv.Flavour().MySQL() && want == "`enforce_storage_engine`" {
				want = "`disabled_storage_engines`"
			}
			i := strings.Index(out[at:], want)
			if i < 0 {
				t.Fatalf("the report lacks %q after byte %d:\n%s", want, at, out)
			}
			at += i
		}
		if strings.Contains(out, "enginemig rollback -D "+schema+" -t scores") {
			t.Errorf("a rollback command for the blocked table:\n%s", out)
		}
		// A Markdown table row has as many cells as its header.
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "| ") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 12 && strings.Contains(line, "`"+schema+".") {
				t.Errorf("table row with a broken cell count: %s", line)
			}
		}
	})
	t.Run("json output", func(t *testing.T) {
		out, code := runPlanCLI(t, with("--database", schema, "--output", "json", "--no-test-compile")...)
		if code != outcome.Refused {
			t.Fatalf("exit %d", code)
		}
		var doc struct {
			Version int `json:"version"`
			Tables  []struct {
				Schema   string `json:"schema"`
				Table    string `json:"table"`
				Rows     int64  `json:"rows"`
				Findings []struct {
					Check, Severity, Message, Remedy string
				} `json:"findings"`
			} `json:"tables"`
			Findings []json.RawMessage `json:"findings"`
			Server   map[string]any    `json:"server"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		flavor := map[bool]string{false: "mariadb", true: "mysql"}[srv.Flavour().MySQL()]
		if doc.Version != plan.FormatVersion || len(doc.Tables) != 2 || doc.Server["flavor"] != flavor {
			t.Fatalf("json: %+v", doc)
		}
		if strings.Contains(out, "_enginemig_plan_") {
			t.Errorf("--no-test-compile still compiled")
		}
	})
	t.Run("usage and connection errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want outcome.Code
		}{
			{"unknown database", with("--database", "no_such_db"), outcome.Usage},
			{"system schema", with("--database", "mysql"), outcome.Usage},
			{"no database", with(), outcome.Usage},
			{"no table matches", with("--database", schema, "--tables", "nothing*"), outcome.Usage},
			{"bad output", with("--database", schema, "--output", "yaml"), outcome.Usage},
			{"unknown flag", with("--database", schema, "--frobnicate"), outcome.Usage},
			{"nobody listens", []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", "1", "--user", "root", "--database", schema}, outcome.Connection},
			{"wrong password", []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root", "--password", "s3cret-pw", "--ssl-mode", "DISABLED", "--database", schema}, outcome.Connection},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, code := runPlanCLI(t, tc.args...)
				if code != tc.want {
					t.Fatalf("exit %d, want %d\n%s", code, tc.want, out)
				}
				if strings.Contains(out, "s3cret-pw") {
					t.Fatalf("password printed:\n%s", out)
				}
			})
		}
	})
}
