package plan

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A plan file as `enginemig plan --out` writes it, the base of the seed corpus.
const validPlanJSON = `{
  "version": 1,
  "generated_at": "2025-01-02T03:04:05Z",
  "tool": "dev",
  "server": {"version": "10.11.6-MariaDB", "flavor": "mariadb", "hostname": "db1", "user": "root@%",
    "variables": {"log_bin": "ON", "binlog_format": "ROW"}, "status": {"Table_locks_waited": 3}},
  "databases": ["game"],
  "test_compile": true,
  "ranked_by": "lock wait",
  "tables": [
    {"rank": 1, "schema": "game", "table": "sélect ` + "`x`" + ` order", "engine": "MyISAM", "rows": 1000, "copy_key": "PRIMARY",
     "findings": [{"check": "fulltext", "severity": "warning", "message": "m"}], "blocked": false},
    {"rank": 2, "schema": "game", "table": "b", "engine": "MyISAM", "rows": 5, "copy_key": "",
     "findings": [{"check": "no-usable-key", "severity": "blocker", "message": "no key"}], "blocked": true}
  ],
  "findings": [{"check": "binlog", "severity": "info", "message": "ok"}],
  "totals": {},
  "summary": {}
}
`

// FuzzDecode: the plan reader never panics, and whatever it accepts is a consistent plan that
// survives being written and read again unchanged (so a hand-edited file cannot smuggle in a
// state that apply would read differently, e.g. a blocked table marked unblocked).
// Run it with: go test ./plan -fuzz FuzzDecode -fuzztime 1m
func FuzzDecode(f *testing.F) {
	f.Add([]byte(validPlanJSON))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(bytes.NewReader(data))
		if err != nil {
			if p != nil {
				t.Fatal("Decode returned a plan and an error")
			}
			return
		}
		if p.Version != FormatVersion || p.Server == nil {
			t.Fatalf("accepted a plan with version %d, server %v", p.Version, p.Server)
		}
		for _, tp := range p.Tables {
			if tp.Schema == "" || tp.Table == "" || (len(Blockers(tp.Findings)) > 0) != tp.Blocked {
				t.Fatalf("accepted an inconsistent table %+v", tp)
			}
		}
		b, err := Marshal(p)
		if err != nil {
			t.Fatalf("accepted plan does not encode: %v", err)
		}
		p2, err := Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("accepted plan does not read back: %v\n%s", err, b)
		}
		b2, _ := Marshal(p2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("plan changed on a second round trip:\n%s\nvs\n%s", b, b2)
		}
	})
}

// Hand edits and damage each give an error, never a plan.
func TestDecodeRejectsHandEdits(t *testing.T) {
	if _, err := Decode(strings.NewReader(validPlanJSON)); err != nil {
		t.Fatalf("the valid seed is rejected: %v", err)
	}
	for name, edit := range map[string]func(string) string{
		"unblocked by hand":   func(s string) string { return strings.Replace(s, `"blocked": true`, `"blocked": false`, 1) },
		"blocker removed":     func(s string) string { return strings.Replace(s, `"severity": "blocker"`, `"severity": "fatal"`, 1) },
		"empty check id":      func(s string) string { return strings.Replace(s, `"check": "binlog"`, `"check": ""`, 1) },
		"unknown field":       func(s string) string { return strings.Replace(s, `"tool": "dev"`, `"tool": "dev", "force": true`, 1) },
		"other version":       func(s string) string { return strings.Replace(s, `"version": 1,`, `"version": 2,`, 1) },
		"no version":          func(s string) string { return strings.Replace(s, `"version": 1,`, ``, 1) },
		"version as a string": func(s string) string { return strings.Replace(s, `"version": 1,`, `"version": "1",`, 1) },
		"no server":           func(s string) string { return strings.Replace(s, `"server": {`, `"serverx": {`, 1) },
		"null server":         func(s string) string { return strings.Replace(s, `"databases"`, `"server": null, "databases"`, 1) },
		"table without schema": func(s string) string {
			return strings.Replace(s, `"schema": "game", "table": "b"`, `"schema": "", "table": "b"`, 1)
		},
		"truncated":        func(s string) string { return s[:len(s)/2] },
		"trailing object":  func(s string) string { return s + `{"version": 1}` },
		"two plans":        func(s string) string { return s + s },
		"rows as a string": func(s string) string { return strings.Replace(s, `"rows": 5,`, `"rows": "5",`, 1) },
		"not JSON":         func(string) string { return "version: 1\n" },
		"empty":            func(string) string { return "" },
		"array":            func(string) string { return "[]" },
	} {
		edited := edit(validPlanJSON)
		if edited == validPlanJSON {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if p, err := Decode(strings.NewReader(edited)); err == nil {
			t.Errorf("%s: accepted (%d tables)", name, len(p.Tables))
		}
	}
}

// The corpus in testdata/fuzz/FuzzDecode is in the go test -fuzz format; make sure it is there
// (go test runs every file in it as a case of FuzzDecode).
func TestDecodeCorpusPresent(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzDecode"))
	if err != nil || len(entries) < 5 {
		t.Fatalf("seed corpus missing: %v (%d files)", err, len(entries))
	}
}
