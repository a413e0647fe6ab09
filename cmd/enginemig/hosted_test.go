package main

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// hostedCase is one kind of account a host gives.
type hostedCase struct {
	name, binlog string
	trust        bool   // log_bin_trust_function_creators
	global       string // the account's global privileges
	refused      string // "": converts
	ci           bool   // in every run; the others with ENGINEMIG_HOSTED_ROWS (the proof at size)
}

var hostedCases = []hostedCase{
	{name: "shared host, no binlog", binlog: "OFF", ci: true},
	{name: "shared host, binlog", binlog: "ROW", refused: "log_bin_trust_function_creators", ci: true},
	{name: "shared host, binlog, creators trusted", binlog: "ROW", trust: true},
	{name: "managed server", binlog: "ROW", global: "REPLICATION SLAVE, REPLICATION CLIENT"},
}

// What a DBA on shared hosting or a managed server runs, as the account the host gives (ALL on one
// database, every statement capped, 40 connections; a managed server's also the replication
// privileges), with performance_schema off, while the application writes: `plan` then `apply
// --plan` with no setting but the connection convert every MyISAM table of the database (two
// under writers, every acknowledged write present) and `rollback` swaps one back, or, where no
// capture can work (the binlog on, no replication privilege, routine creators not trusted), plan
// and apply refuse naming every route and create nothing. On the sandbox's MySQL (GTID
// consistency enforced: no trigger capture; performance_schema off: no MySQL cut-over) every case
// is refused. ENGINEMIG_HOSTED_ROWS (rows of the table under writers, 8 writers) and
// ENGINEMIG_HOSTED_LIMIT (the statement limit, seconds) run every case at size: the proof in
// docs/testing/replicas-hosted-galera.md.
func TestHostedAccountPlansAndApplies(t *testing.T) {
	rows, _ := strconv.Atoi(os.Getenv("ENGINEMIG_HOSTED_ROWS"))
	limit := cmp.Or(os.Getenv("ENGINEMIG_HOSTED_LIMIT"), "0.02")
	for _, c := range hostedCases {
		if !c.ci && rows == 0 {
			continue
		}
		t.Run(c.name, func(t *testing.T) { hostedPlanApply(t, c, rows, limit) })
	}
}

func hostedPlanApply(t *testing.T, c hostedCase, rows int, limit string) {
	srv := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: c.binlog, ExtraArgs: []string{"--performance-schema=OFF"}})
	if srv.Flavour().MySQL() {
		c.refused = "enforce_gtid_consistency"
		if c.global != "" {
			c.refused = "performance_schema"
		}
	}
	schema, root := sandboxtest.FreshDatabase(t, srv)
	if c.trust {
		sandboxtest.MustExec(t, root, "SET GLOBAL log_bin_trust_function_creators = 1")
		t.Cleanup(func() { root.Exec("SET GLOBAL log_bin_trust_function_creators = 0") })
	}
	account := "'site'@'%'"
	sandboxtest.MustExec(t, root, "CREATE USER "+account+" IDENTIFIED BY 'pw'", "GRANT ALL PRIVILEGES ON "+dbconn.QuoteIdent(schema)+".* TO "+account)
	if srv.Flavour().MySQL() {
		ms, _ := strconv.ParseFloat(limit, 64)
		sandboxtest.MustExec(t, root, fmt.Sprintf("SET GLOBAL max_execution_time = %d", int(ms*1000)), "ALTER USER "+account+" WITH MAX_USER_CONNECTIONS 40")
		t.Cleanup(func() { root.Exec("SET GLOBAL max_execution_time = 0") })
	} else {
		sandboxtest.MustExec(t, root, "GRANT USAGE ON *.* TO "+account+" WITH MAX_USER_CONNECTIONS 40 MAX_STATEMENT_TIME "+limit)
	}
	if c.global != "" {
		sandboxtest.MustExec(t, root, "GRANT "+c.global+" ON *.* TO "+account)
	}
	// The application writes as an account of the same database with the host's real statement
	// limit (30 s): the scaled one above stands for what a large table's index build meets, while
	// the application's waits for enginemig's chunk locks (milliseconds) do not grow with the table.
	sandboxtest.MustExec(t, root, "CREATE USER 'siteapp'@'%' IDENTIFIED BY 'pw'", "GRANT ALL PRIVILEGES ON "+dbconn.QuoteIdent(schema)+".* TO 'siteapp'@'%'")
	if !srv.Flavour().MySQL() {
		sandboxtest.MustExec(t, root, "GRANT USAGE ON *.* TO 'siteapp'@'%' WITH MAX_STATEMENT_TIME 30")
	}
	site := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "siteapp", Password: "pw", SSLMode: dbconn.SSLDisabled}
	app, err := dbconn.OpenApplication(context.Background(), site, schema, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	tables, cfg := []string{"posts", "members"}, ackload.Config{Writers: 3, RowsPerWriter: 3000}
	if rows > 0 {
		tables, cfg = []string{"posts"}, ackload.Config{Writers: 8, RowsPerWriter: rows / 8}
	}
	cfg.Via = func(int) (*sql.DB, func()) { return app, nil }
	var loads []*ackload.Load
	for i, name := range tables {
		cfg.Seed = uint64(i + 59)
		l, err := ackload.Create(context.Background(), root, schema, name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		loads = append(loads, l)
	}
	sandboxtest.MustExec(t, root, "CREATE TABLE "+dbconn.QualifiedName(schema, "settings")+" (name VARCHAR(64) PRIMARY KEY, value TEXT) ENGINE=MyISAM",
		"INSERT INTO "+dbconn.QualifiedName(schema, "settings")+" VALUES ('a', 'b'), ('c', 'd')")
	empty := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(empty, nil, 0o600)
	conn := []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "site", "--password", "pw", "--ssl-mode", "DISABLED"}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	var stops []func()
	for _, l := range loads {
		stops = append(stops, l.Start())
	}
	stopAll := func() {
		for _, s := range stops {
			s()
		}
		stops = nil
	}
	defer stopAll()

	out, code := runCLI(t, append(append([]string{"plan"}, conn...), "--database", schema, "--out", planFile)...)
	t.Logf("plan: exit %d", code)
	if c.refused != "" {
		if code != outcome.Refused || !strings.Contains(out, c.refused) {
			t.Fatalf("plan: exit %d, want %d naming %s\n%s", code, outcome.Refused, c.refused, out)
		}
		if c.global == "" && !strings.Contains(out, "GRANT REPLICATION SLAVE") && !strings.Contains(out, "binlog in ROW format") {
			t.Fatalf("plan's refusal does not name binlog capture's route:\n%s", out)
		}
		t.Logf("plan's refusal:\n%s", findingLines(out, "blocker"))
		out, code = runCLI(t, append(append([]string{"apply"}, conn...), "--plan", planFile, "--no-progress")...)
		t.Logf("apply --plan: exit %d\n%s", code, lastLines(out, 3))
		if code != outcome.Refused || tableExists(root, schema, "_posts_new") || engineOfTable(root, schema, "posts") != "MyISAM" {
			t.Fatalf("apply --plan: exit %d, want %d with nothing created\n%s", code, outcome.Refused, out)
		}
		return
	}
	if code != outcome.OK {
		t.Fatalf("plan as the hosted account: exit %d\n%s", code, out)
	}
	t.Logf("plan's findings:\n%s", findingLines(out, "warning"))
	// performance_schema is off here: plan says once what it sees less of.
	if !strings.Contains(out, "performance-schema: performance_schema is OFF") {
		t.Errorf("plan does not say what it cannot see with performance_schema off:\n%s", out)
	}
	out, code = runCLI(t, append(append([]string{"apply"}, conn...), "--plan", planFile, "--no-progress")...)
	t.Logf("apply --plan: exit %d\n%s", code, lastLines(out, 4))
	if code != outcome.OK {
		t.Fatalf("apply --plan as the hosted account: exit %d\n%s", code, out)
	}
	stopAll()
	for i, name := range tables {
		checkLoad(t, root, loads[i], schema, name, false)
	}
	for _, name := range append(tables, "settings") {
		if e := engineOfTable(root, schema, name); e != "InnoDB" {
			t.Errorf("%s is %s after apply --plan", name, e)
		}
	}
	if !tableExists(root, schema, "_enginemig_migrations") {
		t.Error("the state is not in the account's database")
	}
	out, code = runCLI(t, append(append([]string{"rollback"}, conn...), "--database", schema, "--table", "settings")...)
	if code != outcome.OK || engineOfTable(root, schema, "settings") != "MyISAM" {
		t.Fatalf("rollback as the hosted account: exit %d, settings is %s\n%s", code, engineOfTable(root, schema, "settings"), out)
	}
}

// findingLines are plan's text output lines of one severity, with their remedies.
func findingLines(out, severity string) string {
	var keep []string
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.ToLower(strings.TrimLeft(l, " !")), severity+" ") {
			keep = append(keep, l)
			if i+1 < len(lines) && strings.Contains(lines[i+1], "remedy:") {
				keep = append(keep, lines[i+1])
			}
		}
	}
	return strings.Join(keep, "\n")
}

func lastLines(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func tableExists(db *sql.DB, schema, name string) bool {
	var n int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&n)
	return n == 1
}

func engineOfTable(db *sql.DB, schema, name string) string {
	var e sql.NullString
	db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&e)
	return e.String
}
