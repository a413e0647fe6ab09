package bench

import (
	"context"
	"database/sql"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Short steps: tests check behaviour (what ran, where, how often), never timing.
const (
	testStep   = 300 * time.Millisecond
	testWarmup = 50 * time.Millisecond
)

// comCounters reads the server's statement counters, which count executions of prepared
// statements too (performance_schema digests do not, on MariaDB 10.11).
func comCounters(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Com_update', 'Com_insert', 'Com_delete')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[strings.ToLower(strings.TrimPrefix(k, "Com_"))], _ = strconv.ParseInt(v, 10, 64)
	}
	return out
}

func opCount(r Result, name string) int64 {
	var n int64
	for _, s := range r.Steps {
		if o, ok := s.Op(name); ok {
			n += o.Count
		}
	}
	return n
}

// TestMixRatioIsHonoured counts the statements the server executed and checks that they are the
// ones the report claims, in the proportions of the mix.
func TestMixRatioIsHonoured(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	gameTable(t, db, "players", 3000)
	before := comCounters(t, db)
	const threads = 2
	mix := Mix{Select: 4, Update: 2, Insert: 1, Delete: 1, Source: "test"}
	rep, err := Run(context.Background(), db, Options{Mode: ModeScratch, Schema: schema, Table: "players", SampleRows: 2000,
		Config: Config{Threads: []int{threads}, Duration: testStep, Mix: mix, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	after := comCounters(t, db)
	var got [4]int64
	for _, r := range rep.Results {
		if r.Steps[0].Total.Errors != 0 {
			t.Fatalf("%s had errors: %+v", r.Label, r.Steps[0].Ops)
		}
		for i, name := range []string{"select", "update", "insert", "delete"} {
			got[i] += opCount(r, name)
		}
	}
	total := got[0] + got[1] + got[2] + got[3]
	if total < 200 {
		t.Fatalf("only %d statements measured; the test needs a few hundred", total)
	}
	// The server saw each reported statement; at most one per thread and side more (the one in
	// flight when the step ended is not reported), plus the bench's own few setup SELECTs.
	slack := map[string]int64{"update": 2 * threads, "insert": 2 * threads, "delete": 2 * threads, "select": 2*threads + 60}
	for i, name := range []string{"select", "update", "insert", "delete"} {
		server := after[name] - before[name]
		if server < got[i] || server > got[i]+slack[name] {
			t.Errorf("%s: server executed %d, report says %d", name, server, got[i])
		}
		want := float64([]int{mix.Select, mix.Update, mix.Insert, mix.Delete}[i]) / float64(mix.Total())
		share := float64(got[i]) / float64(total)
		// Binomial spread for a few thousand draws is about 1 percentage point; allow 5.
		if math.Abs(share-want) > 0.05 {
			t.Errorf("%s share %.3f, mix wants %.3f", name, share, want)
		}
	}
	if rep.Mix.String() != "4:2:1:1" || rep.Mix.Source != "test" {
		t.Errorf("report mix %v from %q", rep.Mix, rep.Mix.Source)
	}
}

// TestAutoMixReadsPerformanceSchema runs a known mix of statements against a table and checks
// that the derived mix has those proportions and names its source.
func TestAutoMixReadsPerformanceSchema(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	gameTable(t, db, "players", 500)
	sandboxtest.MustExec(t, db, "TRUNCATE TABLE performance_schema.table_io_waits_summary_by_table")
	for i := 1; i <= 60; i++ {
		var n int
		if err := db.QueryRow("SELECT coins FROM players WHERE id = ?", i).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if i%6 == 0 {
			sandboxtest.MustExec(t, db, "UPDATE players SET coins = coins + 1 WHERE id = "+strconv.Itoa(i))
		}
		if i%12 == 0 {
			sandboxtest.MustExec(t, db, "INSERT INTO players (level, coins, guild, name) VALUES (1, 1, 1, 'x')")
		}
		if i%30 == 0 {
			sandboxtest.MustExec(t, db, "DELETE FROM players WHERE id = "+strconv.Itoa(i+100))
		}
	}
	m, err := AutoMix(context.Background(), db, schema, "players")
	if err != nil {
		t.Fatal(err)
	}
	// 60 selects : 10 updates : 5 inserts : 2 deletes.
	total := float64(m.Total())
	for _, c := range []struct {
		name string
		got  int
		want float64
	}{{"select", m.Select, 60.0 / 77}, {"update", m.Update, 10.0 / 77}, {"insert", m.Insert, 5.0 / 77}, {"delete", m.Delete, 2.0 / 77}} {
		if share := float64(c.got) / total; math.Abs(share-c.want) > 0.02 {
			t.Errorf("auto mix %s share %.3f, want %.3f (mix %s, %s)", c.name, share, c.want, m, m.Source)
		}
	}
	if !strings.Contains(m.Source, "table_io_waits_summary_by_table") {
		t.Errorf("mix source %q does not say where it came from", m.Source)
	}
	if _, err := AutoMix(context.Background(), db, schema, "no_such_table"); err == nil {
		t.Error("a table without recorded I/O must not get a mix")
	}
}
