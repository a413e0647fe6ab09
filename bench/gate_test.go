package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

var lax = Thresholds{MinQPSRatio: 1e-6, MaxP99Ratio: 1e6}

// impossible: InnoDB would need a thousand times MyISAM's throughput.
var impossible = Thresholds{MinQPSRatio: 1000, MaxP99Ratio: 1e6}

func TestSampleGatePassesAndFailsOnThresholds(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	gameTable(t, db, "players", 2000)
	start := readLive(t, db, schema, "players")
	cfg := GateConfig{Threads: 2, Duration: testStep, Warmup: testWarmup, SampleRows: 1000, Thresholds: lax}
	g, err := SampleGate(context.Background(), db, schema, "players", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Pass || g.Gate != "before-copy" || g.Before.Engine != "MyISAM" || g.After.Engine != "InnoDB" {
		t.Fatalf("lax sample gate: %+v\n%s", g, g)
	}
	cfg.Thresholds = impossible
	g, err = SampleGate(context.Background(), db, schema, "players", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if g.Pass || len(g.Reasons) == 0 || !strings.Contains(g.String(), "FAIL") || !strings.Contains(g.String(), "MyISAM") {
		t.Fatalf("impossible threshold passed or did not explain:\n%s", g)
	}
	if got := readLive(t, db, schema, "players"); got != start {
		t.Fatalf("the sample gate changed the live table: %+v -> %+v", start, got)
	}
	if scratchDBExists(t, db) {
		t.Fatal("the sample gate left its scratch database")
	}
}

func TestReadOnlyGates(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	gameTable(t, db, "players", 2000)
	sandboxtest.MustExec(t, db, "CREATE TABLE _players_new LIKE players", "ALTER TABLE _players_new ENGINE=InnoDB",
		"INSERT INTO _players_new SELECT * FROM players")
	src, shadow := readLive(t, db, schema, "players"), readLive(t, db, schema, "_players_new")
	cfg := GateConfig{Threads: 2, Duration: testStep, Warmup: testWarmup, Thresholds: lax,
		// The write is dropped by read-only gates; the SELECT is bound to each side.
		Queries: []Template{{Name: "query1", Weight: 1, SQL: "SELECT SUM(coins) FROM players WHERE id BETWEEN ? AND ?"},
			{Name: "query2", Weight: 1, SQL: "UPDATE players SET coins = 0 WHERE id = ?"}}}
	g, err := CompareReadOnly(context.Background(), db, schema, "players", "_players_new", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Pass || g.Gate != "before-cutover" || g.After.Engine != "InnoDB" {
		t.Fatalf("lax before-cutover gate:\n%s", g)
	}
	if _, ok := g.After.Steps[0].Op("query1"); !ok {
		t.Fatalf("the user's SELECT was not probed: %+v", g.After.Steps[0].Ops)
	}
	if _, ok := g.After.Steps[0].Op("query2"); ok {
		t.Fatal("a write statement ran in a read-only gate")
	}
	cfg.Thresholds = impossible
	if g, err = CompareReadOnly(context.Background(), db, schema, "players", "_players_new", cfg); err != nil || g.Pass {
		t.Fatalf("impossible before-cutover gate passed (err %v):\n%s", err, g)
	}

	before, err := ProbeReadOnly(context.Background(), db, schema, "players", cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The after-cutover watch probes the same name again (after the swap it is the InnoDB table).
	after, err := ProbeReadOnly(context.Background(), db, schema, "players", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if g := lax.Judge(before, after); !g.Pass {
		t.Fatalf("lax watch failed:\n%s", g)
	}
	if g := impossible.Judge(before, after); g.Pass {
		t.Fatalf("impossible watch passed:\n%s", g)
	}
	if readLive(t, db, schema, "players") != src || readLive(t, db, schema, "_players_new") != shadow {
		t.Fatal("read-only gates changed a table")
	}
}
