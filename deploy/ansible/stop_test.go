package ansible

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// One host's server stops in the middle of its copy: with enginemig_max_fail 0 the batches after
// it do not start, and the summary says why. With the server back, the next run finishes every
// host (the stopped one resumes its copy; the one done before changes nothing). Then rollback.yml
// swaps every table back, and a second rollback changes nothing.
func TestFleetStopsAtAFailedHostThenResumes(t *testing.T) {
	sockDir, err := os.MkdirTemp("", "emfleet") // short: a unix socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "db2.sock")
	const rows = 30000
	f := newFleet(t, hostSpec{name: "db1", rows: 1000},
		hostSpec{name: "db2", rows: rows, vars: map[string]any{"enginemig_apply_args": []string{"--control-socket", sock, "--chunk-time", "1ms", "--reconnect-for", "2s"}}},
		hostSpec{name: "db3", rows: 1000})
	db1, db2, db3 := f.hosts[0], f.hosts[1], f.hosts[2]
	before := f.states(t)
	vars := map[string]any{"enginemig_serial": 1, "enginemig_max_fail": 0}

	// 1. Pause db2's copy once it has rows, stop its server, let the copy go on into the void
	// (and give up reconnecting after 2 s).
	p := f.start(t, "convert.yml", vars)
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var n int
		err := db2.db.QueryRow("SELECT COUNT(*) FROM shop._orders_new").Scan(&n)
		if _, serr := os.Stat(sock); err == nil && serr == nil && n > 0 {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("the playbook ended before db2's copy was seen:\n%s", p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("db2's copy did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.control(t, sock, "pause")
	time.Sleep(200 * time.Millisecond) // the chunk under way ends
	var copied int
	if err := db2.db.QueryRow("SELECT COUNT(*) FROM shop._orders_new").Scan(&copied); err != nil || copied >= rows {
		t.Fatalf("the copy was not paused in its middle (%d of %d rows, %v): make shop.orders larger", copied, rows, err)
	}
	t.Logf("db2's server stops with %d of %d rows copied", copied, rows)
	db2.srv.Halt()
	f.control(t, sock, "resume")
	code, out := p.wait(t)
	if code == 0 {
		t.Errorf("the run exited 0 although db2 failed")
	}
	s, by := f.summary(t, "fleet-summary")
	if outcomes(s) != "db1=done db2=failed db3=not-started" {
		t.Errorf("summary: %s", outcomes(s))
	}
	if r := by["db2"]; r.ExitCode == 0 || r.ExitCode == 4 || !strings.Contains(r.Reason, "apply exited") {
		t.Errorf("db2's result: exit %d (%s): %s", r.ExitCode, r.Status, r.Reason)
	}
	if r := by["db3"]; !strings.Contains(r.Reason, "not started: 1 host(s) failed before its batch (db2)") {
		t.Errorf("db3's reason: %q", r.Reason)
	}
	if !strings.Contains(out, "the hosts after this batch are not started") {
		t.Errorf("the output does not say why the fleet stopped")
	}
	db3.requireUnchanged(t, before[2], "the fleet stopped before its batch")
	if _, err := os.Stat(filepath.Join(f.reports, "db3")); err == nil {
		t.Errorf("db3 has a report directory: something ran for it")
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}

	// 2. The server is back: the same run again finishes every host.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := db2.srv.Relaunch(ctx); err != nil {
		t.Fatal(err)
	}
	code, out = f.play(t, "convert.yml", vars)
	if code != 0 {
		t.Errorf("the run after the server came back exited %d", code)
	}
	s, by = f.summary(t, "fleet-summary")
	if outcomes(s) != "db1=done db2=done db3=done" || !strings.Contains(by["db1"].Reason, "already InnoDB") {
		t.Errorf("summary: %s (db1: %s)", outcomes(s), by["db1"].Reason)
	}
	if r := recap(out); r["db1"].changed != 0 || r["db2"].changed == 0 || r["db3"].changed == 0 {
		t.Errorf("recap %v: db1 unchanged, db2 and db3 changed", r)
	}
	if log, err := os.ReadFile(filepath.Join(f.reports, "db2", "apply.log")); err != nil || !strings.Contains(string(log), "resuming migration") {
		t.Errorf("db2's apply did not resume its copy (%v):\n%s", err, log)
	}
	for i, h := range f.hosts {
		h.requireConverted(t, before[i])
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}

	// 3. Roll the fleet back: check mode lists, the run swaps back, a second run changes nothing.
	converted := db1.state(t)
	code, out = f.play(t, "rollback.yml", nil, "--check", "--limit", "db1")
	if _, by := f.summary(t, "rollback-summary"); code != 0 || !strings.Contains(by["db1"].Reason, "would roll back 2 table(s)") ||
		!equalStates(db1.state(t), converted) {
		t.Fatalf("rollback --check: exit %d, %q; db1 changed: %v\n%s", code, by["db1"].Reason, !equalStates(db1.state(t), converted), out)
	}
	code, out = f.play(t, "rollback.yml", nil)
	if s, _ := f.summary(t, "rollback-summary"); code != 0 || outcomes(s) != "db1=done db2=done db3=done" {
		t.Errorf("rollback: exit %d, %s", code, outcomes(s))
	}
	for i, h := range f.hosts {
		h.requireRolledBack(t, before[i])
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}
	code, out = f.play(t, "rollback.yml", nil, "--limit", "db1")
	_, by = f.summary(t, "rollback-summary")
	if r := recap(out); code != 0 || r["db1"].changed != 0 || !strings.Contains(by["db1"].Reason, "nothing to roll back") {
		t.Fatalf("second rollback: exit %d, recap %v, %q\n%s", code, r, by["db1"].Reason, out)
	}
}
