package migration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

func quickGates(minQPS, maxP99 float64) bench.GateConfig {
	return bench.GateConfig{Threads: 2, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, SampleRows: 2000,
		Thresholds: bench.Thresholds{MinQPSRatio: minQPS, MaxP99Ratio: maxP99, P99SlackMs: -1}}
}

func gateTable(t *testing.T) (string, *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, coins INT NOT NULL, name CHAR(20) NOT NULL, KEY coins (coins)) ENGINE=MyISAM",
		"INSERT INTO t (coins, name) SELECT seq % 100, CONCAT('p', seq) FROM "+sandboxtest.Seq(3000))
	return schema, t
}

// An impossible threshold must fail the before-copy gate with its own exit code, before anything
// is created.
func TestBeforeCopyGateFailsOnImpossibleThreshold(t *testing.T) {
	schema, _ := gateTable(t)
	db := openControl(t, srv)
	opts := testOptions(srv, schema, "t")
	opts.StateSchema = "_state_gatefail"
	opts.Gates, _ = ParseGates("before-copy")
	opts.GateConfig = quickGates(1000, 1000)
	_, err := Run(context.Background(), db, opts)
	if outcome.CodeOf(err) != outcome.GateFailed || !strings.Contains(err.Error(), "before-copy gate failed") {
		t.Fatalf("got %d %v", outcome.CodeOf(err), err)
	}
	if tableExists(t, db, schema, "_t_new") || engineOf(t, db, schema, "t") != "MyISAM" {
		t.Fatal("a failed before-copy gate changed something")
	}
}

func TestAllGatesPassWithLaxThresholds(t *testing.T) {
	schema, _ := gateTable(t)
	db := openControl(t, srv)
	opts := testOptions(srv, schema, "t")
	opts.Gates, _ = ParseGates("all")
	opts.GateConfig = quickGates(0.0001, 10000)
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Gates) != 3 {
		t.Fatalf("want 3 gate results, got %d", len(res.Gates))
	}
	for _, g := range res.Gates {
		if !g.Pass {
			t.Fatalf("gate %s failed: %v", g.Gate, g.Reasons)
		}
	}
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("not converted")
	}
	// The sample gate's live-table reads must not have written anything: same row count.
	var n int
	db.QueryRow("SELECT COUNT(*) FROM `" + schema + "`.t").Scan(&n)
	if n != 3000 {
		t.Fatalf("rows %d, want 3000", n)
	}
}

func TestParseGates(t *testing.T) {
	if g, err := ParseGates("all"); err != nil || len(g) != 3 {
		t.Fatal(g, err)
	}
	if _, err := ParseGates("before-copy,sometimes"); err == nil {
		t.Fatal("unknown gate accepted")
	}
}

// A failing after-cutover watch must roll back to the MyISAM table, losslessly.
func TestAfterCutoverGateFailureRollsBack(t *testing.T) {
	schema, _ := gateTable(t)
	db := openControl(t, srv)
	opts := testOptions(srv, schema, "t")
	opts.StateSchema = "_state_aftergate"
	opts.Gates, _ = ParseGates("after-cutover")
	opts.GateConfig = quickGates(1000, 1000)
	_, err := Run(context.Background(), db, opts)
	if outcome.CodeOf(err) != outcome.GateFailed || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("got %d %v", outcome.CodeOf(err), err)
	}
	if engineOf(t, db, schema, "t") != "MyISAM" || engineOf(t, db, schema, "_t_new") != "InnoDB" {
		t.Fatal("not rolled back")
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM `" + schema + "`.t").Scan(&n)
	if n != 3000 {
		t.Fatalf("rows %d after rollback", n)
	}
}
