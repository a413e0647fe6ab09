package planrun

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/plan"
)

// writePlan writes a plan of schema's tables generated at generated, each with a copy estimate of
// the given seconds; the tables named in blocked carry a blocker.
func writePlan(t *testing.T, schema string, generated time.Time, seconds map[string]float64, order []string, blocked ...string) string {
	t.Helper()
	p := &plan.Plan{GeneratedAt: generated, Server: &plan.ServerInfo{Version: "10.11.6-MariaDB"}}
	for i, name := range order {
		tp := plan.TablePlan{Rank: i + 1, Schema: schema, Table: name, Engine: "MyISAM", Rows: int64(100 * (i + 1)),
			Estimate: plan.Estimate{CopySeconds: seconds[name]}}
		for _, b := range blocked {
			if b == name {
				tp.Blocked = true
				tp.Findings = []plan.Finding{{Check: "autoinc-not-leading", Severity: plan.Blocker, Message: "per-group AUTO_INCREMENT"}}
			}
		}
		p.Tables = append(p.Tables, tp)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := plan.WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

// StatusOf tells each of a plan's tables apart by its newest record since the plan was written:
// done, running (its run holds the table's lock), interrupted (nobody does), failed, blocked by
// the plan, or not started (no record, or only one older than the plan). What is left is every
// table not done and not blocked, and the ETA adds their copy estimates, with the running table's
// rest from its progress instead.
func TestStatusOfAPlanRun(t *testing.T) {
	ctx := context.Background()
	schema, db := sandboxtest.FreshDatabase(t, srv)
	store := state.NewStore(db, schema)
	if err := store.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	record(t, store, schema, "a", state.StageDone, true)
	running := record(t, store, schema, "b", state.StageCopy, false)
	running.RowsTotal, running.RowsCopied = 300, 100
	if err := store.Save(ctx, running); err != nil {
		t.Fatal(err)
	}
	record(t, store, schema, "c", state.StageCopy, false)
	record(t, store, schema, "d", state.StageFailed, true)
	old := record(t, store, schema, "g", state.StageDone, true)
	// b copied 100 rows in 100 s: 200 rows left at that rate is 200 s. g's record is from before
	// the plan. Both are moved on the server, in the column's own terms.
	for q, id := range map[string]int64{"started_at = updated_at - INTERVAL 100 SECOND": running.ID, "started_at = started_at - INTERVAL 2 HOUR": old.ID} {
		if _, err := db.Exec("UPDATE "+store.Name()+" SET "+q+" WHERE id = ?", id); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := state.Lock(ctx, conn(), schema, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()

	seconds := map[string]float64{"a": 10, "b": 20, "c": 30, "d": 40, "e": 50, "f": 60, "g": 70}
	order := []string{"a", "b", "c", "d", "e", "f", "g"}
	path := writePlan(t, schema, time.Now().Add(-time.Hour), seconds, order, "e")
	got, err := StatusOf(ctx, db, store, path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []TableStatus{
		{Table: schema + ".a", State: "done", Rows: 100},
		{Table: schema + ".b", State: "running", Stage: "copy", Rows: 200, Estimate: "3m20s"},
		{Table: schema + ".c", State: "interrupted", Stage: "copy", Rows: 300, Estimate: "30s"},
		{Table: schema + ".d", State: "failed", Stage: "failed", Rows: 400, Estimate: "40s"},
		{Table: schema + ".e", State: "blocked", Rows: 500},
		{Table: schema + ".f", State: "not-started", Rows: 600, Estimate: "1m0s"},
		{Table: schema + ".g", State: "not-started", Rows: 700, Estimate: "1m10s"},
	}
	if len(got.Tables) != len(want) {
		t.Fatalf("%d tables, want %d: %+v", len(got.Tables), len(want), got.Tables)
	}
	for i := range want {
		if got.Tables[i] != want[i] {
			t.Errorf("table %d: %+v, want %+v", i, got.Tables[i], want[i])
		}
	}
	if got.Done != 1 || got.Left != 5 || got.Running != schema+".b" || got.ETA != "6m40s" {
		t.Errorf("done %d, left %d, running %q, ETA %s; want 1, 5, %s.b, 6m40s (200+30+40+60+70 s)", got.Done, got.Left, got.Running, got.ETA, schema)
	}
}

// Before a first apply there is no state table: every table not blocked is not started and the
// ETA is the plan's. A plan file that cannot be read is an error that says so.
func TestStatusOfAPlanNotStarted(t *testing.T) {
	ctx := context.Background()
	schema, db := sandboxtest.FreshDatabase(t, srv)
	store := state.NewStore(db, schema)
	path := writePlan(t, schema, time.Now(), map[string]float64{"a": 90, "b": 5}, []string{"a", "b", "c"}, "b")
	got, err := StatusOf(ctx, db, store, path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, ts := range got.Tables {
		states = append(states, ts.State)
	}
	if strings.Join(states, " ") != "not-started blocked not-started" || got.Done != 0 || got.Left != 2 || got.Running != "" || got.ETA != "1m30s" {
		t.Errorf("states %v, done %d, left %d, running %q, ETA %q; want a and c not started, b blocked, 2 left, 1m30s", states, got.Done, got.Left, got.Running, got.ETA)
	}
	if ok, err := store.Exists(ctx); ok || err != nil {
		t.Errorf("reading the status created the state table (%v, %v)", ok, err)
	}
	_, err = StatusOf(ctx, db, store, filepath.Join(t.TempDir(), "none.json"), time.Now())
	if err == nil || !strings.Contains(err.Error(), "read plan") {
		t.Errorf("a missing plan file: %v", err)
	}
}
