package ansible

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Three servers, one with a blocker: check mode changes nothing anywhere and shows what would
// change; the real run converts the two clean hosts (every row equal) and refuses the blocked one,
// untouched; the summary says so.
func TestConvertFleet(t *testing.T) {
	f := newFleet(t, hostSpec{name: "db1", rows: 2000}, hostSpec{name: "db2", rows: 2000, blocker: true}, hostSpec{name: "db3", rows: 2000})
	before := f.states(t)
	db1, db2, db3 := f.hosts[0], f.hosts[1], f.hosts[2]

	// 0. Bad input stops the run before any host is touched, saying what is wrong.
	code, out := f.play(t, "convert.yml", map[string]any{"enginemig_apply_args": []string{"--password=x"}, "enginemig_max_fail": "some"})
	if code == 0 || !strings.Contains(out, "--password cannot be given there") || !strings.Contains(out, "enginemig_max_fail=some is not a whole number") {
		t.Errorf("bad variables: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(f.reports); err == nil {
		t.Errorf("bad variables: the run wrote reports")
	}

	// 1. --check --diff: every apply a dry run; nothing changes; the diff names the tables.
	code, out = f.play(t, "convert.yml", nil, "--check", "--diff")
	if code == 0 {
		t.Errorf("check mode exited 0 although db2 is refused")
	}
	for i, h := range f.hosts {
		if got := h.state(t); !equalStates(got, before[i]) {
			t.Errorf("check mode changed %s:\nbefore %v\nafter  %v", h.name, before[i], got)
		}
	}
	if db2.hasStateSchema(t) {
		t.Errorf("check mode ran apply on the blocked host db2")
	}
	s, by := f.summary(t, "fleet-summary")
	if !s.DryRun || outcomes(s) != "db1=done db2=refused db3=done" || !strings.Contains(by["db1"].Reason, "dry run") {
		t.Errorf("check-mode summary: dry_run=%v %s (db1: %s)", s.DryRun, outcomes(s), by["db1"].Reason)
	}
	for _, want := range []string{"-shop.orders MyISAM", "+shop.orders InnoDB", "+shop.customers InnoDB"} {
		if strings.Count(out, want) != 2 {
			t.Errorf("--diff shows %q %d times, want once each for db1 and db3", want, strings.Count(out, want))
		}
	}
	if r := recap(out); r["db1"].changed == 0 || r["db2"].changed != 0 || r["db3"].changed == 0 {
		t.Errorf("check mode recap %v: db1 and db3 would change, db2 not", r)
	}
	if t.Failed() {
		t.Fatalf("ansible-playbook --check --diff output:\n%s", out)
	}

	// 2. The real run, inside windows open around the clock (given as a span and as a list): the
	// window variables reach apply as flags it accepts.
	code, out = f.play(t, "convert.yml", map[string]any{"enginemig_copy_window": "daily 00:00-24:00",
		"enginemig_cutover_window": []string{"daily 00:00-12:00", "daily 12:00-24:00"}, "enginemig_window_zone": "UTC"})
	if code == 0 {
		t.Errorf("the run exited 0 although db2 was refused")
	}
	db1.requireConverted(t, before[0])
	db3.requireConverted(t, before[2])
	db2.requireUnchanged(t, before[1], "plan found a blocker there")
	s, by = f.summary(t, "fleet-summary")
	if s.DryRun || outcomes(s) != "db1=done db2=refused db3=done" {
		t.Errorf("summary: dry_run=%v %s", s.DryRun, outcomes(s))
	}
	if r := by["db2"]; r.ExitCode != 4 || r.Status != "refused" || !strings.Contains(r.Reason, "shop.audit: [merge-member]") {
		t.Errorf("db2's result: exit %d (%s), reason %q", r.ExitCode, r.Status, r.Reason)
	}
	for _, name := range []string{"db1", "db3"} {
		r := by[name]
		if !r.Changed || r.ExitCode != 0 || len(r.Tables) != 2 || r.Tables[0].Outcome != "converted" || r.Tables[0].Rows == 0 {
			t.Errorf("%s's result: %+v", name, r)
		}
	}
	text, err := os.ReadFile(filepath.Join(f.reports, "fleet-summary.txt"))
	if err != nil || !strings.Contains(string(text), "1 refused") || !strings.Contains(string(text), "merge-member") {
		t.Errorf("text summary: %v\n%s", err, text)
	}
	if _, err := os.Stat(filepath.Join(f.reports, "db2", "apply.json")); err == nil {
		t.Errorf("apply ran for db2 (its apply.json exists)")
	}
	if r := recap(out); r["db1"].changed == 0 || r["db3"].changed == 0 || r["db2"].changed != 0 || r["db2"].failed != 1 {
		t.Errorf("recap %v: db1 and db3 changed, db2 failed and unchanged", r)
	}
	if t.Failed() {
		t.Fatalf("ansible-playbook output:\n%s", out)
	}
	// A run over hosts already converted changes nothing and exits 0: the stopped-fleet test
	// checks it (db1 there, in the run after the server came back), in the same playbook run that
	// resumes db2.
}
