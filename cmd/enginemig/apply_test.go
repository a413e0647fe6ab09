package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/plan"
)

func TestApplyCommand(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE players (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, coins INT NOT NULL, KEY (coins)) ENGINE=MyISAM",
		"INSERT INTO players (coins) SELECT seq FROM "+sandboxtest.Seq(3000),
		"CREATE TABLE sessions (id INT PRIMARY KEY) ENGINE=InnoDB")
	empty := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(empty, nil, 0o600)
	conn := []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root", "--ssl-mode", "DISABLED"}
	apply := func(extra ...string) (string, outcome.Code) {
		return runCLI(t, append(append([]string{"apply"}, conn...), extra...)...)
	}

	t.Run("status before anything was migrated", func(t *testing.T) {
		out, code := runCLI(t, append(append([]string{"status"}, conn...), "--output", "json")...)
		if code != outcome.OK || !strings.Contains(out, `"migrations": []`) {
			t.Fatalf("status on a fresh server: exit %d\n%s", code, out)
		}
		if out, code := runCLI(t, append(append([]string{"status"}, conn...), "--table", "players")...); code != outcome.Usage {
			t.Fatalf("status --table without --database: exit %d\n%s", code, out)
		}
	})

	t.Run("json summary and exit 0", func(t *testing.T) {
		out, code := apply("--database", schema, "--table", "players", "--output", "json", "--no-progress")
		if code != outcome.OK {
			t.Fatalf("exit %d\n%s", code, out)
		}
		var summary struct {
			Status  string `json:"status"`
			Results []struct {
				RowsCopied int64  `json:"rows_copied"`
				OldTable   string `json:"old_table"`
				Estimate   struct {
					Estimated float64 `json:"estimated_seconds"`
					Actual    float64 `json:"actual_seconds"`
					Ratio     float64 `json:"actual_over_estimated"`
				} `json:"estimate"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &summary); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if summary.Status != "ok" || len(summary.Results) != 1 || summary.Results[0].RowsCopied != 3000 || summary.Results[0].OldTable != "_players_old" {
			t.Fatalf("summary %+v", summary)
		}
		// The estimate is beside what the copy and index build took (the ratio is theirs).
		if e := summary.Results[0].Estimate; e.Estimated <= 0 || e.Actual <= 0 || e.Ratio < 0.9*e.Actual/e.Estimated || e.Ratio > 1.1*e.Actual/e.Estimated {
			t.Errorf("estimate vs actual in the JSON summary: %+v", e)
		}
	})
	t.Run("status lists it and rollback swaps back", func(t *testing.T) {
		out, code := runCLI(t, append(append([]string{"status"}, conn...), "--database", schema, "--output", "json")...)
		if code != outcome.OK || !strings.Contains(out, `"stage": "done"`) || !strings.Contains(out, `"capture_cutover": "mysql-bin.`) {
			t.Fatalf("status exit %d\n%s", code, out)
		}
		out, code = runCLI(t, append(append([]string{"rollback"}, conn...), "--database", schema, "--table", "players")...)
		if code != outcome.OK || !strings.Contains(out, "rolled back") {
			t.Fatalf("rollback exit %d\n%s", code, out)
		}
		var engine string
		db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME='players'", schema).Scan(&engine)
		if engine != "MyISAM" {
			t.Fatalf("players is %s after rollback", engine)
		}
		out, code = runCLI(t, append(append([]string{"status"}, conn...), "--database", schema)...)
		if code != outcome.OK || !strings.Contains(out, "rolled-back") {
			t.Fatalf("status after rollback: %d\n%s", code, out)
		}
	})
	t.Run("plan does not count enginemig's own LOCK TABLES as the application's", func(t *testing.T) {
		// players went through apply (verification, cut-over) and rollback (cut-over): every
		// LOCK TABLES on it in the server's statement digests is enginemig's own.
		out, code := runCLI(t, append(append([]string{"plan"}, conn...), "--database", schema, "--tables", "players", "--output", "json")...)
		if code != outcome.OK || !strings.Contains(out, `"table": "players"`) || strings.Contains(out, "lock-tables") {
			t.Fatalf("plan after apply and rollback: exit %d\n%s", code, out)
		}
	})
	t.Run("markdown summary for the change ticket", func(t *testing.T) {
		sandboxtest.MustExec(t, db, "CREATE TABLE m1 (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO m1 SELECT seq, seq FROM "+sandboxtest.Seq(1000))
		out, code := apply("--database", schema, "--table", "m1", "--output", "markdown", "--no-progress")
		at := 0
		for _, want := range []string{"# enginemig apply: 1 table(s) converted", "exit code 0 (`ok`)", "## Tables",
			"| `" + schema + ".m1` | converted | 1000 |", "## Rolling back", "enginemig rollback -D " + schema + " -t m1    # original kept as _m1_old"} {
			i := strings.Index(out[at:], want)
			if code != outcome.OK || i < 0 {
				t.Fatalf("exit %d; the summary lacks %q after byte %d:\n%s", code, want, at, out)
			}
			at += i
		}
		if out, code := apply("--database", schema, "--table", "m1", "--output", "html"); code != outcome.Usage || !strings.Contains(out, "") {
			t.Fatalf("--output html: exit %d, want %d\n%s", code, outcome.Usage, out)
		}
	})
	t.Run("plan file: converts its tables and skips blocked ones", func(t *testing.T) {
		sandboxtest.MustExec(t, db,
			"CREATE TABLE a1 (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO a1 SELECT seq, seq FROM "+sandboxtest.Seq(500),
			"CREATE TABLE a2 (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO a2 SELECT seq, seq FROM "+sandboxtest.Seq(700),
			"CREATE TABLE blocked (grp INT NOT NULL, n INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (grp, n)) ENGINE=MyISAM")
		planFile := filepath.Join(t.TempDir(), "plan.json")
		out, code := runCLI(t, append(append([]string{"plan"}, conn...), "--database", schema, "--tables", "a*,blocked", "--out", planFile)...)
		if code != outcome.Refused {
			t.Fatalf("plan with a blocked table: exit %d\n%s", code, out)
		}
		statusPlan := func() string {
			out, code := runCLI(t, append(append([]string{"status"}, conn...), "--plan", planFile, "--output", "json")...)
			if code != outcome.OK {
				t.Fatalf("status --plan: exit %d\n%s", code, out)
			}
			return out
		}
		if out := statusPlan(); strings.Count(out, `"state": "not-started"`) != 2 || !strings.Contains(out, `"state": "blocked"`) || !strings.Contains(out, `"left": 2`) {
			t.Fatalf("status --plan before apply:\n%s", out)
		}
		// Applied in part (the blocked table skipped): exit 4, and the summary says which.
		out, code = apply("--plan", planFile, "--output", "json", "--no-progress")
		if code != outcome.Refused || !strings.Contains(out, `"outcome": "skipped"`) || strings.Count(out, `"outcome": "converted"`) != 2 ||
			strings.Count(out, `"actual_over_estimated"`) != 4 { // two results, two summary lines
			t.Fatalf("apply --plan with a blocked table: exit %d\n%s", code, out)
		}
		for tbl, want := range map[string]string{"a1": "InnoDB", "a2": "InnoDB", "blocked": "MyISAM"} {
			var engine string
			db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", schema, tbl).Scan(&engine)
			if engine != want {
				t.Errorf("%s is %s, want %s", tbl, engine, want)
			}
		}
		if out := statusPlan(); strings.Count(out, `"state": "done"`) != 2 || !strings.Contains(out, `"left": 0`) {
			t.Fatalf("status --plan after apply:\n%s", out)
		}
		// Run again: what this plan converted is reported as done, not refused.
		out, code = apply("--plan", planFile, "--no-progress")
		if code != outcome.Refused || strings.Count(out, "already-converted: converted by migration #") != 2 {
			t.Fatalf("apply --plan again: exit %d\n%s", code, out)
		}
		// A plan without blockers, run twice: both exit 0, the second a no-op.
		sandboxtest.MustExec(t, db, "CREATE TABLE a3 (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO a3 SELECT seq, seq FROM "+sandboxtest.Seq(300))
		clean := filepath.Join(t.TempDir(), "clean.json")
		if out, code := runCLI(t, append(append([]string{"plan"}, conn...), "--database", schema, "--tables", "a3", "--out", clean)...); code != outcome.OK {
			t.Fatalf("plan a3: exit %d\n%s", code, out)
		}
		for run := 1; run <= 2; run++ {
			out, code := apply("--plan", clean, "--no-progress")
			want := map[int]string{1: " converted: 300 rows", 2: "already-converted"}[run]
			if code != outcome.OK || !strings.Contains(out, want) {
				t.Fatalf("clean plan, run %d: exit %d\n%s", run, code, out)
			}
			// The database still holds MyISAM tables outside this plan: named, no advice yet.
			if !strings.Contains(out, schema+".blocked: still MyISAM") || strings.Contains(out, "To keep MyISAM out") {
				t.Fatalf("clean plan, run %d: the summary does not name the MyISAM tables left:\n%s", run, out)
			}
		}
		// Two tables at a time, with one metrics endpoint for both: each converted, the summary in
		// plan order.
		sandboxtest.MustExec(t, db, "CREATE TABLE p1 (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO p1 SELECT seq, seq FROM "+sandboxtest.Seq(2000),
			"CREATE TABLE p2 LIKE p1", "INSERT INTO p2 SELECT * FROM p1", "CREATE TABLE p3 LIKE p1", "INSERT INTO p3 SELECT * FROM p1")
		both := filepath.Join(t.TempDir(), "parallel.json")
		if out, code := runCLI(t, append(append([]string{"plan"}, conn...), "--database", schema, "--tables", "p1,p2,p3", "--out", both)...); code != outcome.OK {
			t.Fatalf("plan p1,p2,p3: exit %d\n%s", code, out)
		}
		out, code = apply("--plan", both, "--parallel", "2", "--metrics-listen", "127.0.0.1:0", "--no-progress")
		if code != outcome.OK || strings.Count(out, " converted: 2000 rows") != 3 || !regexp.MustCompile(`(?s)p\d\s+converted.*p\d\s+converted.*p\d\s+converted`).MatchString(out) {
			t.Fatalf("apply --plan --parallel 2: exit %d\n%s", code, out)
		}
		for _, bad := range [][]string{{"--parallel", "2", "--control-socket", filepath.Join(t.TempDir(), "s")}, {"--parallel", "0"}} {
			if out, code := apply(append([]string{"--plan", both}, bad...)...); code != outcome.Usage {
				t.Fatalf("apply --plan %v: exit %d, want 2\n%s", bad, code, out)
			}
		}
		if out, code := apply("--database", schema, "--table", "p1", "--parallel", "2"); code != outcome.Usage {
			t.Fatalf("--parallel without --plan: exit %d, want 2\n%s", code, out)
		}
	})
	t.Run("cleanup keeps the original unless --drop-old", func(t *testing.T) {
		exists := func(name string) bool {
			var n int
			db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", schema, name).Scan(&n)
			return n == 1
		}
		// After the rollback above, players is MyISAM again and its InnoDB copy is _players_new.
		out, code := runCLI(t, append(append([]string{"cleanup"}, conn...), "--database", schema, "--table", "players")...)
		if code != outcome.OK || exists("_players_new") || !strings.Contains(out, "_players_new") {
			t.Fatalf("cleanup: exit %d\n%s", code, out)
		}
		out, code = runCLI(t, append(append([]string{"cleanup"}, conn...), "--database", schema, "--table", "a1")...)
		if code != outcome.OK || !exists("_a1_old") {
			t.Fatalf("cleanup without --drop-old dropped the original: exit %d\n%s", code, out)
		}
		out, code = runCLI(t, append(append([]string{"cleanup"}, conn...), "--database", schema, "--table", "a1", "--drop-old")...)
		if code != outcome.OK || exists("_a1_old") {
			t.Fatalf("cleanup --drop-old: exit %d\n%s", code, out)
		}
	})
	t.Run("a table another client keeps locked: JSON log names it, --lock-timeout gives up with exit 6", func(t *testing.T) {
		sandboxtest.MustExec(t, db, "CREATE TABLE locked (id INT PRIMARY KEY) ENGINE=MyISAM", "INSERT INTO locked SELECT seq FROM "+sandboxtest.Seq(1000))
		holder, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		var id int64
		holder.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id)
		if _, err := holder.ExecContext(context.Background(), "LOCK TABLES locked WRITE"); err != nil {
			t.Fatal(err)
		}
		defer holder.ExecContext(context.Background(), "UNLOCK TABLES")
		out, code := runCLI(t, append(append([]string{"--log-format", "json", "apply"}, conn...),
			"--database", schema, "--table", "locked", "--lock-timeout", "2s", "--no-progress")...)
		var wait map[string]any
		for _, line := range strings.Split(out, "\n") {
			if json.Unmarshal([]byte(line), &wait) == nil && wait["msg"] == "waiting for a lock" {
				break
			}
			wait = nil
		}
		if code != outcome.FailedSafe || wait == nil || !strings.Contains(fmt.Sprint(wait["blocked_by"]), fmt.Sprintf("connection %d (user root@", id)) {
			t.Fatalf("exit %d (want 6), lock wait record %v; want it to name connection %d:\n%s", code, wait, id, out)
		}
	})
	t.Run("already InnoDB exits 4", func(t *testing.T) {
		out, code := apply("--database", schema, "--table", "sessions")
		if code != outcome.Refused {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("conflicting flags exit 2", func(t *testing.T) {
		if _, code := apply("--plan", "x.json", "--table", "players", "--database", schema); code != outcome.Usage {
			t.Fatalf("exit %d", code)
		}
		if _, code := apply("--database", schema); code != outcome.Usage {
			t.Fatalf("missing --table: exit %d", code)
		}
		if _, code := apply("--database", schema, "--table", "players", "--capture", "sometimes"); code != outcome.Usage {
			t.Errorf("--capture sometimes: exit %d, want usage", code)
		}
		if _, code := apply("--database", schema, "--table", "players", "--gate", "sometimes"); code != outcome.Usage {
			t.Fatalf("bad gate: exit %d", code)
		}
		if out, code := apply("--database", schema, "--table", "players", "--snapshot-wait", "-1s"); code != outcome.Usage {
			t.Fatalf("--snapshot-wait -1s: exit %d, want usage\n%s", code, out)
		}
		for _, n := range []string{"-1", "9"} {
			if out, code := apply("--database", schema, "--table", "players", "--copy-workers", n); code != outcome.Usage {
				t.Fatalf("--copy-workers %s: exit %d\n%s", n, code, out)
			}
		}
		for _, cmd := range []string{"rollback", "cleanup", "bench"} {
			if _, code := runCLI(t, append(append([]string{cmd}, conn...), "--database", schema)...); code != outcome.Usage {
				t.Fatalf("%s without --table: exit %d", cmd, code)
			}
		}
	})
	t.Run("corrupt plan file exits 2", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "plan.json")
		os.WriteFile(bad, []byte(`{"version": 99, "tables": [`), 0o600)
		if _, code := apply("--plan", bad); code != outcome.Usage {
			t.Fatalf("exit %d", code)
		}
	})
}

// The password must not show in the process list, output, errors or the state table.
func TestApplyNeverShowsPassword(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	const secret = "S3cret-Pass-42"
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(200000),
		"CREATE USER 'mig'@'127.0.0.1' IDENTIFIED BY '"+secret+"'",
		"GRANT ALL ON *.* TO 'mig'@'127.0.0.1'")
	bin := filepath.Join(t.TempDir(), "enginemig")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	empty := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(empty, nil, 0o600)
	args := []string{"apply", "--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "mig",
		"--password", secret, "--ssl-mode", "DISABLED", "--database", schema, "--table", "t", "--chunk-time", "2ms", "--output", "json"}
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Read the process's command line while it runs, as `ps` would, until it ends (a finished
	// process shows an empty one). Like the mysql client, enginemig can only overwrite the
	// password once it has parsed its arguments, so the last reading is the one judged: the
	// first, taken while the binary starts, may come before that on a busy machine.
	var cmdline []byte
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
		if err != nil || len(b) == 0 {
			break
		}
		cmdline = b
	}
	err := cmd.Wait()
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	if len(cmdline) == 0 {
		t.Fatal("could not read the process command line")
	}
	if strings.Contains(string(cmdline), secret) {
		t.Fatalf("password visible in /proc/pid/cmdline: %q", cmdline)
	}
	if strings.Contains(out.String(), secret) {
		t.Fatal("password in output")
	}
	// A wrong password: the error names the user, not the password.
	bad := append([]string{}, args...)
	bad[10] = "wrong-" + secret
	o2, err := exec.Command(bin, bad...).CombinedOutput()
	if code := exitCode(err); code != int(outcome.Connection) || strings.Contains(string(o2), secret) {
		t.Fatalf("wrong password: exit %d, output %s", code, o2)
	}
	var states string
	db.QueryRowContext(context.Background(), "SELECT GROUP_CONCAT(CONCAT_WS('|', schema_name, table_name, stage, COALESCE(error,''))) FROM _enginemig.migrations").Scan(&states)
	if states == "" || strings.Contains(states, secret) {
		t.Fatalf("state table: %q", states)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// A plan that lists no table (plan found no MyISAM table: a re-run after everything was
// converted) is nothing to do: exit 0, "nothing_to_do" in JSON, and no connection at all (the
// port here has no server).
func TestApplyEmptyPlanIsNothingToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := plan.WriteFile(path, &plan.Plan{Server: &plan.ServerInfo{}, Databases: []string{"game"}}); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--host", "127.0.0.1", "--port", "1"}
	out, code := runCLI(t, append([]string{"apply", "--plan", path, "--output", "json"}, conn...)...)
	var doc struct {
		NothingToDo bool   `json:"nothing_to_do"`
		Status      string `json:"status"`
		Tables      []any  `json:"tables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != outcome.OK || !doc.NothingToDo || doc.Status != "ok" || doc.Tables == nil {
		t.Fatalf("exit %d, %+v (%v):\n%s", code, doc, err, out)
	}
	if out, code := runCLI(t, append([]string{"apply", "--plan", path}, conn...)...); code != outcome.OK || !strings.Contains(out, "nothing to do") {
		t.Fatalf("text: exit %d:\n%s", code, out)
	}
}
