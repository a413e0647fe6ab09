package plan

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/bench/workload"
)

func TestParseGrants(t *testing.T) {
	g := ParseGrants([]string{
		"GRANT USAGE ON *.* TO `app`@`%` IDENTIFIED BY PASSWORD '*ABC'",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `app`@`%`",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP ON `shop`.* TO `app`@`%`",
		"GRANT ALL PRIVILEGES ON `log\\_%`.* TO `app`@`%`",
		"GRANT ALTER, INDEX ON `shop`.`orders` TO `app`@`%`",
		"GRANT UPDATE (`price`) ON `shop`.`items` TO `app`@`%`",
		"GRANT EXECUTE ON PROCEDURE `shop`.`p` TO `app`@`%`",
		"GRANT `reporting`, `ops` TO `app`@`%`",
		"GRANT PROXY ON ''@'%' TO 'app'@'%'",
	})
	for _, tc := range []struct {
		priv, schema, table string
		want                bool
	}{
		{"REPLICATION SLAVE", "", "", true},
		{"REPLICATION CLIENT", "", "", true}, // BINLOG MONITOR is its MariaDB 10.5+ name
		{"SELECT", "", "", false},
		{"SELECT", "shop", "orders", true},
		{"ALTER", "shop", "orders", true},
		{"ALTER", "shop", "items", false},
		{"UPDATE", "shop", "items", true}, // from the database level, not the column grant
		{"LOCK TABLES", "shop", "", false},
		{"LOCK TABLES", "log_2024", "", true},
		{"LOCK TABLES", "logx2024", "", false}, // the underscore was escaped
		{"EXECUTE", "shop", "", false},
	} {
		if got := g.Has(tc.priv, tc.schema, tc.table); got != tc.want {
			t.Errorf("Has(%s, %s, %s) = %v, want %v", tc.priv, tc.schema, tc.table, got, tc.want)
		}
	}
	if strings.Join(g.roles, ",") != "`reporting`,`ops`" {
		t.Errorf("roles %v", g.roles)
	}
}

func TestRefersTo(t *testing.T) {
	for _, tc := range []struct {
		text, def string
		want      bool
		rest      string
	}{
		{"`t` WHERE x", "s", true, "WHERE x"},
		{"`s` . `t`", "other", true, ""},
		{"`other` . `t`", "s", false, ""},
		{"T", "s", true, ""},
		{"`t2`", "s", false, ""},
		{"`t`", "", false, ""},
	} {
		got, rest := workload.RefersTo(tc.text, tc.def, "s", "t")
		if got != tc.want || (got && rest != tc.rest) {
			t.Errorf("refersTo(%q, %q) = %v %q", tc.text, tc.def, got, rest)
		}
	}
	if got := parseUnion("CREATE TABLE `m` (\n) ENGINE=MRG_MyISAM UNION=(`a`,`other`.`b`,`we``ird`)", "s"); strings.Join(got, "|") != "s.a|other.b|s.we`ird" {
		t.Errorf("parseUnion: %v", got)
	}
}

func TestSelected(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		schema   string
		name     string
		want     bool
	}{
		{nil, "s", "anything", true},
		{[]string{"orders"}, "s", "orders", true},
		{[]string{"orders"}, "s", "orders_old", false},
		{[]string{"log_*"}, "s", "log_2024", true},
		{[]string{"shop.cart_?"}, "shop", "cart_1", true},
		{[]string{"shop.cart_?"}, "blog", "cart_1", false},
	} {
		if got := selected(tc.patterns, tc.schema, tc.name); got != tc.want {
			t.Errorf("selected(%v, %s.%s) = %v", tc.patterns, tc.schema, tc.name, got)
		}
	}
	all := map[string]bool{"t": true, "_t_old": true, "_x_new": true}
	if !isWorkingTable("_t_old", all) || isWorkingTable("_x_new", all) || !isWorkingTable("_enginemig_plan_0badc0de", all) ||
		!isWorkingTable("t_emchg", all) || !isWorkingTable("t_emchb", all) || isWorkingTable("x_emchg", all) {
		t.Error("isWorkingTable")
	}
}

func samplePlan() *Plan {
	return &Plan{Version: FormatVersion, Server: server("10.11.6-MariaDB", map[string]string{"log_bin": "ON"}), Databases: []string{"s"},
		Findings: []Finding{newFinding("durability", Info, "m", "r")},
		Tables: []TablePlan{{Rank: 1, Schema: "s", Table: "t", Rows: 10, Blocked: true,
			Findings: []Finding{newFinding("no-usable-key", Blocker, "m", "r")}}}}
}

func TestPlanFileRoundTripAndStrictness(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plan.json")
	if err := WriteFile(path, samplePlan()); err != nil {
		t.Fatal(err)
	}
	p, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tables) != 1 || len(Blockers(p.Tables[0].Findings)) != 1 || !p.Server.MariaDB() || !p.Server.AtLeast(10, 11, 0) {
		t.Fatalf("round trip lost data: %+v", p)
	}
	good, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name, content string
		want          string
	}{
		{"not json", "{plan", "malformed JSON"},
		{"no version", `{"server":{}}`, "no \"version\""},
		{"future version", strings.Replace(string(good), `"version": 1`, `"version": 2`, 1), "unsupported plan file version 2"},
		{"unknown field", strings.Replace(string(good), `"version": 1,`, `"version": 1, "surprise": true,`, 1), "unknown field"},
		{"unknown severity", strings.Replace(string(good), `"severity": "blocker"`, `"severity": "fatal"`, 1), "unknown severity"},
		{"unblocked by hand", strings.Replace(string(good), `"blocked": true`, `"blocked": false`, 1), "\"blocked\" is false"},
		{"trailing data", string(good) + "{}", "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader([]byte(tc.content)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Decode(strings.NewReader(`{"version": 99}`)); !errors.Is(err, ErrVersion) {
		t.Fatalf("version error must be ErrVersion: %v", err)
	}
}

func TestRegistryIsComplete(t *testing.T) {
	// Every id of the original plan checklist (except system-schema, which is a scope rule) is registered.
	for _, id := range []string{"autoinc-not-leading", "row-too-large", "too-many-columns", "too-many-indexes", "key-too-long",
		"fulltext", "spatial", "merge-member", "packed-readonly", "no-usable-key", "require-pk-setting", "triggers",
		"partitioned", "foreign-keys", "crashed", "row-format-fixed", "key-block-size", "data-index-directory",
		"myisam-only-options", "binlog", "binlog-metadata", "disk", "buffer-pool", "file-per-table", "strict-mode",
		"gtid-consistency", "durability", "privileges", "count-star", "lock-tables", "transactions", "insert-delayed", "autoinc-reuse",
		"trigger-writes-own-table", "errors-with-triggers", "multi-row-errors", "trigger-other-engine",
		"limit-without-order-by", "fulltext-natural"} {
		c, ok := registry[id]
		if !ok {
			t.Errorf("check %s not registered", id)
			continue
		}
		if c.What == "" || !c.Severity.Valid() {
			t.Errorf("check %s lacks a description or severity", id)
		}
	}
	doc, err := os.ReadFile("../docs/plan/checks.md")
	if err != nil {
		t.Fatalf("docs/plan/checks.md: %v", err)
	}
	for _, c := range Checks() {
		if !strings.Contains(string(doc), "`"+c.ID+"`") {
			t.Errorf("docs/plan/checks.md does not document check %s", c.ID)
		}
	}
}
