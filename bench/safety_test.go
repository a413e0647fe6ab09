package bench

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// liveState is what would change if a benchmark wrote to the table: its checksum and the
// server's own count of rows written to it.
type liveState struct {
	checksum int64
	writes   int64
}

func readLive(t *testing.T, db *sql.DB, schema, name string) liveState {
	t.Helper()
	var s liveState
	var n string
	if err := db.QueryRow("CHECKSUM TABLE `"+name+"` EXTENDED").Scan(&n, &s.checksum); err != nil {
		t.Fatal(err)
	}
	err := db.QueryRow(`SELECT COUNT_INSERT + COUNT_UPDATE + COUNT_DELETE FROM performance_schema.table_io_waits_summary_by_table
		WHERE OBJECT_SCHEMA = ? AND OBJECT_NAME = ?`, schema, name).Scan(&s.writes)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scratchTables(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", DefaultScratchDB).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func scratchDBExists(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", DefaultScratchDB).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestNoWriteReachesTheLiveTable runs write mixes in scratch mode and probes in read-only mode,
// and checks the live table is untouched; then --on-live-table does write, which shows the check
// would notice.
func TestNoWriteReachesTheLiveTable(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	gameTable(t, db, "players", 2000)
	ctx := context.Background()
	start := readLive(t, db, schema, "players")
	cfg := Config{Threads: []int{2}, Duration: testStep, Warmup: testWarmup, Mix: Mix{Select: 4, Update: 4, Insert: 2, Delete: 1},
		Queries:    []Template{{Name: "query1", Weight: 1, SQL: "UPDATE players SET coins = coins + 1 WHERE id BETWEEN ? AND ?"}},
		Background: []Template{{Name: "report1", SQL: "SELECT SUM(coins) FROM players"}}}
	rep, err := Run(ctx, db, Options{Mode: ModeScratch, Schema: schema, Table: "players", SampleRows: 1500, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if n := opCount(rep.Results[0], "update") + opCount(rep.Results[1], "query1"); n == 0 {
		t.Fatal("no writes were measured, so the test proves nothing")
	}
	if got := readLive(t, db, schema, "players"); got != start {
		t.Fatalf("scratch mode changed the live table: %+v -> %+v", start, got)
	}

	ro := Config{Threads: []int{2}, Duration: testStep, Warmup: testWarmup, Mix: ReadOnlyMix(),
		Queries: []Template{{Name: "query1", Weight: 1, SQL: "SELECT COUNT(*) FROM players WHERE id BETWEEN ? AND ?"}}}
	if _, err := Run(ctx, db, Options{Mode: ModeReadOnly, Schema: schema, Table: "players", Config: ro}); err != nil {
		t.Fatal(err)
	}
	if got := readLive(t, db, schema, "players"); got != start {
		t.Fatalf("read-only probes changed the live table: %+v -> %+v", start, got)
	}
	// Read-only mode refuses writes before touching anything.
	if _, err := Run(ctx, db, Options{Mode: ModeReadOnly, Schema: schema, Table: "players", Config: cfg}); err == nil {
		t.Fatal("read-only mode accepted a write mix")
	}
	if got := readLive(t, db, schema, "players"); got != start {
		t.Fatalf("a refused run changed the live table: %+v -> %+v", start, got)
	}

	// The explicit opt-in does write to the named table.
	cfg.Background = nil
	if _, err := Run(ctx, db, Options{Mode: ModeLive, Schema: schema, Table: "players", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := readLive(t, db, schema, "players"); got.writes <= start.writes {
		t.Fatalf("--on-live-table did not write (%+v -> %+v): the safety check above could not have failed", start, got)
	}
}

// TestScratchIsDroppedOnSuccessErrorAndInterrupt checks the cleanup on each way a run can end.
func TestScratchIsDroppedOnSuccessErrorAndInterrupt(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	gameTable(t, db, "players", 1000)
	if scratchDBExists(t, db) {
		t.Fatal("scratch database left over by an earlier test")
	}
	opts := Options{Mode: ModeScratch, Schema: schema, Table: "players", SampleRows: 500,
		Config: Config{Threads: []int{1}, Duration: testStep, Warmup: testWarmup}}
	if _, err := Run(context.Background(), db, opts); err != nil {
		t.Fatal(err)
	}
	if scratchDBExists(t, db) {
		t.Fatalf("success: scratch database left behind with %d tables", scratchTables(t, db))
	}

	// A statement that cannot be bound fails after the copies exist.
	bad := opts
	bad.Background = []Template{{Name: "report1", SQL: "SELECT SUM(coins) FROM other_table"}}
	if _, err := Run(context.Background(), db, bad); err == nil || !strings.Contains(err.Error(), "other_table") {
		t.Fatalf("want an error naming the unbound statement, got %v", err)
	}
	if scratchDBExists(t, db) {
		t.Fatal("error: scratch database left behind")
	}

	// An interrupt in the middle of a long step.
	long := opts
	long.Duration = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	began := time.Now()
	_, err := Run(ctx, db, long)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if time.Since(began) > 20*time.Second {
		t.Fatalf("the interrupt took %s to stop the run", time.Since(began))
	}
	if scratchDBExists(t, db) {
		t.Fatal("interrupt: scratch database left behind")
	}

	// A scratch database that existed before is kept (someone else may use it); our tables go.
	sandboxtest.MustExec(t, db, "CREATE DATABASE "+DefaultScratchDB, "CREATE TABLE "+DefaultScratchDB+".keep (a INT)")
	defer sandboxtest.MustExec(t, db, "DROP DATABASE "+DefaultScratchDB)
	if _, err := Run(context.Background(), db, opts); err != nil {
		t.Fatal(err)
	}
	if n := scratchTables(t, db); n != 1 {
		t.Fatalf("%d tables in the pre-existing scratch database, want only the user's", n)
	}
}

// TestBackgroundReportRunsAlongside checks that report queries loop in their own client and
// are reported, and that the foreground keeps its mix.
func TestBackgroundReportRunsAlongside(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	gameTable(t, db, "players", 2000)
	rep, err := Run(context.Background(), db, Options{Mode: ModeScratch, Schema: schema, Table: "players", SampleRows: 2000,
		Config: Config{Threads: []int{2}, Duration: testStep, Warmup: testWarmup,
			Background: []Template{{Name: "report1", SQL: "SELECT SUM(coins) FROM players"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		s := r.Steps[0]
		if len(s.Background) != 1 || s.Background[0].Count == 0 || s.Background[0].Errors != 0 {
			t.Fatalf("%s: background report not measured: %+v", r.Label, s.Background)
		}
		if s.Total.Count == 0 {
			t.Fatalf("%s: no foreground statements", r.Label)
		}
	}
	if rep.Results[0].Engine != "MyISAM" || rep.Results[1].Engine != "InnoDB" {
		t.Fatalf("sides are %s and %s", rep.Results[0].Engine, rep.Results[1].Engine)
	}
}
