package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// runCLI runs the app in-process and returns its standard output and exit code.
func runCLI(t *testing.T, args ...string) (string, outcome.Code) {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Writer = &out
	app.ErrWriter = &out
	err := app.RunContext(context.Background(), append([]string{"enginemig"}, args...))
	if err != nil {
		t.Logf("enginemig %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), outcome.CodeOf(err)
}

// TestBenchCommand drives `enginemig bench` against a sandbox server: one server for all the
// cases, started here rather than in a TestMain this package's other commands also need.
func TestBenchCommand(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE players (id INT UNSIGNED NOT NULL AUTO_INCREMENT, level INT NOT NULL, coins INT NOT NULL, guild INT NOT NULL, "+
			"name CHAR(40) NOT NULL, PRIMARY KEY (id), KEY guild (guild)) ENGINE=MyISAM",
		"INSERT INTO players (level, coins, guild, name) SELECT seq % 100, seq % 1000, seq % 50, CONCAT('p', seq) FROM seq_1_to_3000")
	// An empty option file keeps the developer's ~/.my.cnf out of the test.
	empty := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	conn := []string{"bench", "--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root", "--ssl-mode", "DISABLED",
		"--database", schema, "--table", "players"}
	short := []string{"--duration", "300ms", "--warmup", "0s", "--sample-rows", "2000"}
	checksum := func() string {
		var n, c string
		if err := db.QueryRow("CHECKSUM TABLE players").Scan(&n, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := checksum()

	t.Run("json report and offline chart", func(t *testing.T) {
		chart := filepath.Join(t.TempDir(), "bench.html")
		// runCLI merges stdout and stderr: --log-level warn keeps the log's "chart written" record
		// (stderr) out of the JSON report (stdout).
		out, code := runCLI(t, append(append([]string{"--log-level", "warn"}, append(conn, short...)...), "--threads", "1,2", "--output", "json", "--chart", chart,
			"--query", "1:SELECT name, coins FROM players WHERE id BETWEEN ? AND ?",
			"--background", "SELECT SUM(coins) FROM players")...)
		if code != outcome.OK {
			t.Fatalf("exit %d: %s", code, out)
		}
		var rep struct {
			Mode string `json:"mode"`
			Mix  struct {
				Select, Update, Insert int
				Source                 string
			} `json:"mix"`
			Results []struct {
				Engine string `json:"engine"`
				Steps  []struct {
					Threads    int `json:"threads"`
					Total      struct{ Count int64 }
					Ops        []struct{ Name string }
					Background []struct{ Count int64 }
				} `json:"steps"`
			} `json:"results"`
			Comparison []struct{ Threads int } `json:"comparison"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if rep.Mode != "scratch" || rep.Mix.Select != 16 || rep.Mix.Update != 7 || rep.Mix.Insert != 1 || rep.Mix.Source != "default" {
			t.Fatalf("report header: %+v", rep)
		}
		if len(rep.Results) != 2 || rep.Results[0].Engine != "MyISAM" || rep.Results[1].Engine != "InnoDB" || len(rep.Comparison) != 2 {
			t.Fatalf("want MyISAM and InnoDB sides compared at 2 steps: %+v", rep)
		}
		for _, r := range rep.Results {
			for _, s := range r.Steps {
				if s.Total.Count == 0 || len(s.Ops) != 4 || len(s.Background) != 1 {
					t.Fatalf("%s at %d threads: %+v", r.Engine, s.Threads, s)
				}
			}
		}
		if st, err := os.Stat(chart); err != nil || st.Size() == 0 {
			t.Fatalf("chart not written: %v", err)
		}
	})

	t.Run("text report with io mix", func(t *testing.T) {
		sandboxtest.MustExec(t, db, "UPDATE players SET coins = coins + 1 WHERE id < 10")
		out, code := runCLI(t, append(append(conn, short...), "--threads", "2", "--mix", "io")...)
		if code != outcome.OK || !strings.Contains(out, "table_io_waits_summary_by_table") || !strings.Contains(out, "InnoDB") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		before = checksum() // this subtest changed the table itself, above
	})

	t.Run("failed gate exits with its code", func(t *testing.T) {
		out, code := runCLI(t, append(append(conn, short...), "--threads", "2", "--gate", "--gate-min-qps-ratio", "1000")...)
		if code != outcome.GateFailed || !strings.Contains(out, "FAIL") {
			t.Fatalf("exit %d, want %d:\n%s", code, outcome.GateFailed, out)
		}
		out, code = runCLI(t, append(append(conn, short...), "--threads", "2", "--gate", "--gate-min-qps-ratio", "0.000001", "--gate-max-p99-ratio", "1000000")...)
		if code != outcome.OK || !strings.Contains(out, "PASS") {
			t.Fatalf("lax gate: exit %d:\n%s", code, out)
		}
	})

	t.Run("read-only probes", func(t *testing.T) {
		out, code := runCLI(t, append(append(conn, short...), "--threads", "2", "--read-only")...)
		if code != outcome.OK || !strings.Contains(out, "read-only probes") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})

	if got := checksum(); got != before {
		t.Fatalf("bench changed the live table: checksum %s -> %s", before, got)
	}

	t.Run("captured mix", func(t *testing.T) { benchCapturedMix(t, db, schema, conn, short) })

	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"--read-only", "--on-live-table"},
			{"--mix", "16:7"},
			{"--compare", "other"},
			{"--read-only", "--mix", "16:7:1"},
			{"--threads", "0"},
			{"--query", "SELECT 1"},
			{"--output", "yaml"},
			{"--observe", "1s"},
			{"--save-mix", "x.json"},
			{"--from-log", "x.log", "--mix", "16:7:1"},
			{"--mix", "no-such-file.json"},
		} {
			out, code := runCLI(t, append(append(conn, short...), args...)...)
			if code != outcome.Usage {
				t.Errorf("%v: exit %d, want %d (usage):\n%s", args, code, outcome.Usage, out)
			}
		}
	})
}
