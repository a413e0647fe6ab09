package planrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/state"
)

// A target is named as the summary and the logs name tables: schema.table.
func TestTargetString(t *testing.T) {
	if got := (Target{Schema: "shop", Table: "orders"}).String(); got != "shop.orders" {
		t.Fatalf("got %q", got)
	}
}

// The summary's lock time is the cut-over's; a result without a cut-over (a dry run) held none.
func TestLockHeldIsTheCutovers(t *testing.T) {
	if got := lockHeld(&migration.Result{}); got != 0 {
		t.Errorf("no cut-over: %v", got)
	}
	if got := lockHeld(&migration.Result{Cutover: &cutover.Result{LockHeld: 7 * time.Millisecond}}); got != 7*time.Millisecond {
		t.Errorf("a cut-over that held the table 7ms: %v", got)
	}
}

// A plan run skips a table only when it is InnoDB now and enginemig's newest record of it is a
// finished conversion: not a MyISAM table with such a record (rolled back by hand), not an InnoDB
// table enginemig never converted, nor one whose newest run failed; without a state table
// nothing was converted.
func TestConvertedNeedsInnoDBAndADoneRecord(t *testing.T) {
	ctx := context.Background()
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE done (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE handback (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE TABLE native (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE retried (id INT PRIMARY KEY) ENGINE=InnoDB")
	if ok, why, err := converted(ctx, db, schema, Target{schema, "done"}); ok || why != "" || err != nil {
		t.Fatalf("without a state table: %v %q %v", ok, why, err)
	}
	store := state.NewStore(db, schema)
	if err := store.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	done := record(t, store, schema, "done", state.StageDone, true)
	record(t, store, schema, "handback", state.StageDone, true)
	record(t, store, schema, "retried", state.StageDone, true)
	record(t, store, schema, "retried", state.StageFailed, true)
	for _, c := range []struct {
		table string
		want  bool
	}{{"done", true}, {"handback", false}, {"native", false}, {"retried", false}, {"missing", false}} {
		ok, why, err := converted(ctx, db, schema, Target{schema, c.table})
		if err != nil || ok != c.want {
			t.Errorf("%s: converted %v (%v), want %v", c.table, ok, err, c.want)
		}
		if ok && c.want && why != fmt.Sprintf("converted by migration #%d", done.ID) {
			t.Errorf("%s: why %q, want the migration that converted it", c.table, why)
		}
	}
}

// runner is a Runner on schema, on a pool opened as apply opens its own, that converts with
// apply's defaults (its state in schema itself) and notes the tables it set up options for.
func runner(t *testing.T, schema string, asked *[]string) *Runner {
	t.Helper()
	db, err := dbconn.Open(context.Background(), conn(), "", preflight.Pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var mu sync.Mutex
	return &Runner{DB: db, Plan: true, StateSchema: schema, Parallel: 1, Logger: quiet,
		Options: func(tg Target) (migration.Options, error) {
			mu.Lock()
			*asked = append(*asked, tg.Table)
			mu.Unlock()
			return migration.Options{Conn: conn(), Schema: tg.Schema, Table: tg.Table, StateSchema: schema, Logger: quiet}, nil
		},
		Show: func(Target, *migration.Options) func(*migration.Result) { return func(*migration.Result) {} },
	}
}

// A plan run converts its table and says so in the summary; run again (a plan re-run after an
// interruption), it skips that table without setting up its migration.
func TestRunnerConvertsThenSkipsWhatItConverted(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE c (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO c SELECT seq, seq FROM "+sandboxtest.Seq(50))
	var asked []string
	r := runner(t, schema, &asked)
	targets := []Target{{schema, "c"}}
	results, lines, failed, err := r.Run(context.Background(), targets)
	if err != nil || failed != "" {
		t.Fatalf("run: %v (failed %q)", err, failed)
	}
	if len(results) != 1 || len(lines) != 1 || lines[0].Outcome != "converted" || lines[0].Table != schema+".c" || lines[0].Rows != 50 {
		t.Fatalf("results %d, summary %+v; want c converted with its 50 rows", len(results), lines)
	}
	if lines[0].LockHeld != lockHeld(results[0]) || results[0].Cutover == nil {
		t.Errorf("the summary's lock time %v is not the cut-over's (%+v)", lines[0].LockHeld, results[0].Cutover)
	}
	if e := engine(t, db, schema, "c"); e != "InnoDB" {
		t.Fatalf("c is %s after the run", e)
	}

	results, lines, failed, err = r.Run(context.Background(), targets)
	if err != nil || failed != "" || len(results) != 0 {
		t.Fatalf("second run: %d results, %v (failed %q)", len(results), err, failed)
	}
	if len(lines) != 1 || lines[0].Outcome != "already-converted" || !strings.HasPrefix(lines[0].Reason, "converted by migration #") {
		t.Errorf("second run's summary: %+v", lines)
	}
	if strings.Join(asked, " ") != "c" {
		t.Errorf("options were set up for %q, want c once", asked)
	}
}

// With Parallel 2 both tables convert at once, sharing one throttle, and the results come back in
// plan order.
func TestRunnerConvertsInParallel(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	for _, name := range []string{"x", "y"} {
		sandboxtest.MustExec(t, db, "CREATE TABLE "+name+" (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
			"INSERT INTO "+name+" SELECT seq, seq FROM "+sandboxtest.Seq(30))
	}
	var asked []string
	r := runner(t, schema, &asked)
	r.Parallel = 2
	results, lines, failed, err := r.Run(context.Background(), []Target{{schema, "x"}, {schema, "y"}})
	if err != nil || failed != "" {
		t.Fatalf("run: %v (failed %q)", err, failed)
	}
	if len(results) != 2 || results[0].Table != "x" || results[1].Table != "y" {
		t.Fatalf("%d results, want x and y in plan order", len(results))
	}
	for i, name := range []string{"x", "y"} {
		if lines[i].Table != schema+"."+name || lines[i].Outcome != "converted" || lines[i].Rows != 30 {
			t.Errorf("summary line %d: %+v", i, lines[i])
		}
		if e := engine(t, db, schema, name); e != "InnoDB" {
			t.Errorf("%s is %s after the run", name, e)
		}
	}
	if r.throttle == nil || !slices.Contains(asked, "x") || !slices.Contains(asked, "y") {
		t.Errorf("no shared throttle (%v), or options set up for %q only", r.throttle != nil, asked)
	}
}

// The first failure stops the plan: the failed table is named, with its own error (and exit
// code), and the tables after it are not reached, left as they were.
func TestRunnerStopsAtTheFirstFailure(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE b (id INT PRIMARY KEY, v INT) ENGINE=MyISAM")
	var asked []string
	r := runner(t, schema, &asked)
	results, lines, failed, err := r.Run(context.Background(), []Target{{schema, "missing"}, {schema, "b"}})
	if failed != schema+".missing" || outcome.CodeOf(err) != outcome.Usage || !strings.Contains(err.Error(), schema+".missing: ") || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("failed %q, %v (code %d); want the missing table named, a usage error", failed, err, outcome.CodeOf(err))
	}
	if len(results) != 0 || len(lines) != 2 || lines[0].Outcome != "failed" || lines[1].Outcome != "not-reached" || lines[1].Table != schema+".b" {
		t.Fatalf("results %d, summary %+v; want missing failed and b not reached", len(results), lines)
	}
	if e := engine(t, db, schema, "b"); e != "MyISAM" || engine(t, db, schema, "_b_new") != "" {
		t.Errorf("b is %s after a run that did not reach it", e)
	}
	if strings.Join(asked, " ") != "missing" {
		t.Errorf("options were set up for %q, want only the failed table's", asked)
	}
}

// A table's options that cannot be set up (a bad flag) stop the whole run with that error alone,
// as if no table had run: no summary, nothing converted.
func TestRunnerStopsOnBadOptions(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE b (id INT PRIMARY KEY, v INT) ENGINE=MyISAM")
	var asked []string
	r := runner(t, schema, &asked)
	bad := outcome.New(outcome.Usage, errors.New("--chunk-time: not a duration"), "")
	r.Options = func(Target) (migration.Options, error) { return migration.Options{}, bad }
	results, lines, failed, err := r.Run(context.Background(), []Target{{schema, "b"}})
	if !errors.Is(err, bad) || err.Error() != bad.Error() || failed != "" || results != nil || lines != nil {
		t.Fatalf("got %v (failed %q, %d results, summary %+v); want the options' error alone", err, failed, len(results), lines)
	}
	if e := engine(t, db, schema, "b"); e != "MyISAM" {
		t.Errorf("b is %s", e)
	}
}
