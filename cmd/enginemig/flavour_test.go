package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/plan"
)

// The whole product on the server ENGINEMIG_TEST_FLAVOUR selects, as a user runs it: plan reports
// the server's facts and nothing false, then apply and rollback run while application writers
// keep writing, both exit 0, and the table that comes back holds every acknowledged write.
// ENGINEMIG_PROOF_ROWS_PER_WRITER (default 5000, four writers) makes it a bigger table.
func TestPlanApplyRollbackUnderWriters(t *testing.T) {
	perWriter := 5000
	if n, err := strconv.Atoi(os.Getenv("ENGINEMIG_PROOF_ROWS_PER_WRITER")); err == nil && n > 0 {
		perWriter = n
	}
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	app, err := srv.Open(schema)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.SetMaxOpenConns(16)
	l, err := ackload.Create(context.Background(), app, schema, "horses", ackload.Config{Writers: 4, RowsPerWriter: perWriter,
		Seed: uint64(time.Now().UnixNano()), Pause: 300 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root",
		"--ssl-mode", "DISABLED", "--database", schema}
	checkPlan(t, srv, conn)

	stop := l.Start()
	defer stop()
	start := time.Now()
	out, code := runCLI(t, append(append([]string{"apply"}, conn...), "--table", "horses", "--no-progress")...)
	applied := time.Since(start)
	if code != outcome.OK {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	time.Sleep(time.Second) // writes only the InnoDB table receives
	start = time.Now()
	out, code = runCLI(t, append(append([]string{"rollback"}, conn...), "--table", "horses")...)
	rolledBack := time.Since(start)
	if code != outcome.OK {
		t.Fatalf("rollback: exit %d\n%s", code, out)
	}
	time.Sleep(300 * time.Millisecond) // and writes to the MyISAM table that came back
	stop()
	var engine string
	db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'horses'").Scan(&engine)
	if engine != "MyISAM" {
		t.Fatalf("horses is %q after the rollback", engine)
	}
	checkLoad(t, db, l, schema, "horses", false)
	t.Logf("%s: apply exit 0 in %s, rollback exit 0 in %s", srv.Flavour(), applied.Round(time.Millisecond), rolledBack.Round(time.Millisecond))
}

// checkPlan runs plan --output json and checks the server facts it reports against the server's
// flavour, and that the only findings are the ones this server's settings call for.
func checkPlan(t *testing.T, srv *sandbox.Server, conn []string) {
	t.Helper()
	out, code := runCLI(t, append(append([]string{"plan"}, conn...), "--tables", "horses", "--output", "json")...)
	if code != outcome.OK {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &p); err != nil {
		t.Fatalf("plan output: %v\n%s", err, out)
	}
	s, f := p.Server, srv.Flavour()
	wantFlavor := map[bool]string{true: "mysql", false: "mariadb"}[f.MySQL()]
	wantGTID := map[bool]string{true: "ON", false: ""}[f.MySQL()] // MariaDB has no gtid_mode
	if s.Flavor != wantFlavor || !strings.HasPrefix(s.Version, strings.SplitN(string(f), "-", 2)[1]) ||
		s.Var("log_bin") != "ON" || s.Var("binlog_format") != "ROW" || s.Var("binlog_row_image") != "FULL" ||
		s.Var("gtid_mode") != wantGTID || !s.PerformanceSchema {
		t.Errorf("%s: plan reports flavor=%s version=%s log_bin=%s binlog_format=%s row_image=%s gtid_mode=%q performance_schema=%v",
			f, s.Flavor, s.Version, s.Var("log_bin"), s.Var("binlog_format"), s.Var("binlog_row_image"), s.Var("gtid_mode"), s.PerformanceSchema)
	}
	// What each server's settings call for: MySQL runs with GTID consistency enforced (the
	// application's mixed-engine transactions break while tables differ) and MINIMAL row
	// metadata; the MariaDB sandboxes with FULL metadata. Other info findings may come and go.
	want := map[string]bool{}
	if f.MySQL() {
		want = map[string]bool{"gtid-consistency": true, "binlog-metadata": true}
	}
	var all []plan.Finding
	all = append(all, p.Findings...)
	for _, tp := range p.Tables {
		all = append(all, tp.Findings...)
	}
	for _, fd := range all {
		if fd.Severity != plan.Info && !want[fd.Check] {
			t.Errorf("%s: unexpected finding %s (%s): %s", f, fd.Check, fd.Severity, fd.Message)
		}
		delete(want, fd.Check)
		t.Logf("%s: finding %s (%s)", f, fd.Check, fd.Severity)
	}
	for c := range want {
		t.Errorf("%s: plan did not report %s", f, c)
	}
	t.Logf("%s: plan: %s %s, gtid_mode=%q, %d findings", f, s.Flavor, s.Version, s.Var("gtid_mode"), len(all))
}
