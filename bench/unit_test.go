package bench

import (
	"strings"
	"testing"
)

func TestParseMix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{"16:7:1", "16:7:1", false},
		{"16:7:1:0", "16:7:1", false},
		{" 4:2:1:1 ", "4:2:1:1", false},
		{"16:7", "", true},
		{"16:-7:1", "", true},
		{"a:b:c", "", true},
		{"1:2:3:4:5", "", true},
	} {
		m, err := ParseMix(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseMix(%q) error %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if err == nil && m.String() != tc.want {
			t.Errorf("ParseMix(%q) = %s, want %s", tc.in, m, tc.want)
		}
	}
}

func TestMixFromCountsKeepsProportionsAndRareOps(t *testing.T) {
	m, ok := mixFromCounts(16000, 7000, 1000, 0)
	if !ok || m.String() != "16:7:1" {
		t.Fatalf("got %v %v, want 16:7:1", m, ok)
	}
	m, _ = mixFromCounts(1000000, 0, 3, 0)
	if m.Insert != 1 || m.Select < 900 {
		t.Fatalf("a rare insert must stay in the mix: %v", m)
	}
	if _, ok := mixFromCounts(0, 0, 0, 0); ok {
		t.Fatal("no I/O must not give a mix")
	}
}

func TestTemplateBindRewritesTheTableReference(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"SELECT SUM(coins) FROM players", "SELECT SUM(coins) FROM `s2`.`p_copy`"},
		{"SELECT * FROM game.players WHERE id BETWEEN ? AND ?", "SELECT * FROM `s2`.`p_copy` WHERE id BETWEEN ? AND ?"},
		{"select count(*) from `game`.`players` join guilds g on g.id = guild", "select count(*) from `s2`.`p_copy` join guilds g on g.id = guild"},
		{"UPDATE players SET coins = coins + 1 WHERE id = ?", "UPDATE `s2`.`p_copy` SET coins = coins + 1 WHERE id = ?"},
		{"SELECT * FROM {table} WHERE guild = ?", "SELECT * FROM `s2`.`p_copy` WHERE guild = ?"},
	} {
		got, err := Template{Name: "q", SQL: tc.sql}.Bind("game", "players", "s2", "p_copy")
		if err != nil || got != tc.want {
			t.Errorf("Bind(%q) = %q, %v; want %q", tc.sql, got, err, tc.want)
		}
	}
	// A statement about another table must not be benchmarked against the wrong one.
	if _, err := (Template{Name: "q", SQL: "SELECT * FROM players_archive"}).Bind("game", "players", "s2", "x"); err == nil {
		t.Fatal("a statement that does not name the table must be refused")
	}
}

func TestTemplateReadOnlyAndParams(t *testing.T) {
	for sql, ro := range map[string]bool{
		"SELECT 1 FROM t":                      true,
		"/* report */ select sum(x) from t":    true,
		"WITH a AS (SELECT 1) SELECT * FROM a": true,
		"UPDATE t SET x = 1":                   false,
		"SELECT * FROM t FOR UPDATE":           false,
		"SELECT x INTO @v FROM t":              false,
		"DELETE FROM t":                        false,
	} {
		if got := (Template{SQL: sql}).ReadOnly(); got != ro {
			t.Errorf("ReadOnly(%q) = %v, want %v", sql, got, ro)
		}
	}
	if n := (Template{SQL: "SELECT '?', `a?` FROM t WHERE id BETWEEN ? AND ?"}).Params(); n != 2 {
		t.Fatalf("Params = %d, want 2 (quoted ? are not placeholders)", n)
	}
	if _, err := ParseQuery("SELECT 1", 1); err == nil {
		t.Fatal("a query without weight must be refused")
	}
	q, err := ParseQuery("3:SELECT a, b FROM t WHERE id = ?", 1)
	if err != nil || q.Weight != 3 || !strings.HasPrefix(q.SQL, "SELECT a, b") {
		t.Fatalf("ParseQuery: %+v %v", q, err)
	}
}

func TestJudge(t *testing.T) {
	res := func(label string, qps, p99 float64, errs int64) Result {
		return Result{Target: Target{Label: label}, Steps: []Step{{Threads: 16, Total: Stats{Count: 1000, QPS: qps, P99: p99, Errors: errs}}}}
	}
	th := DefaultThresholds()
	for _, tc := range []struct {
		name   string
		before Result
		after  Result
		pass   bool
	}{
		{"faster", res("MyISAM", 1000, 10, 0), res("InnoDB", 2000, 5, 0), true},
		{"slightly slower within 0.9", res("MyISAM", 1000, 10, 0), res("InnoDB", 950, 12, 0), true},
		{"much slower", res("MyISAM", 1000, 10, 0), res("InnoDB", 500, 10, 0), false},
		{"p99 tripled", res("MyISAM", 1000, 10, 0), res("InnoDB", 1000, 30, 0), false},
		{"sub-ms p99 noise", res("MyISAM", 1000, 0.2, 0), res("InnoDB", 1000, 0.5, 0), true},
		{"new errors", res("MyISAM", 1000, 10, 0), res("InnoDB", 1000, 10, 3), false},
		{"nothing in common", res("MyISAM", 1000, 10, 0), Result{Target: Target{Label: "InnoDB"}}, false},
	} {
		g := th.Judge(tc.before, tc.after)
		if g.Pass != tc.pass {
			t.Errorf("%s: pass=%v want %v\n%s", tc.name, g.Pass, tc.pass, g)
		}
		if !g.Pass && len(g.Reasons) == 0 {
			t.Errorf("%s: a failed gate must say why", tc.name)
		}
	}
}
