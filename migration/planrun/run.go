// Package planrun runs a plan's tables and says where a plan's run stands: the tables in plan
// order, up to Parallel at once sharing one throttle and one metrics endpoint, stopping at the
// first failure; a table the plan's last run converted is skipped.
package planrun

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/throttle"
	"github.com/enginemig/enginemig/plan"
)

// Target is one table to convert.
type Target struct{ Schema, Table string }

func (t Target) String() string { return t.Schema + "." + t.Table }

// Outcome is one line of a whole-plan run's summary.
type Outcome struct {
	Table    string        `json:"table"`
	Outcome  string        `json:"outcome"` // converted, already-converted, skipped, failed, not-reached
	Reason   string        `json:"reason,omitempty"`
	Rows     int64         `json:"rows,omitempty"`
	Time     time.Duration `json:"total_ns,omitempty"`
	LockHeld time.Duration `json:"cutover_lock_ns,omitempty"`
	// Estimate: the copy estimate beside the actual copy and index build.
	Estimate *migration.EstimateCheck `json:"estimate,omitempty"`
}

// Runner converts the targets in plan order, up to Parallel at a time. The first failure stops
// the plan: tables not started by then are not reached, those already running finish.
type Runner struct {
	DB *sql.DB
	// Plan: the targets are a plan file's, and a table its last run converted is skipped
	// (StateSchema holds the records that say so).
	Plan        bool
	StateSchema string
	Parallel    int
	Logger      *slog.Logger
	// Options are one table's migration options (the command's flags). An error there stops the
	// whole run, as before any table ran.
	Options func(Target) (migration.Options, error)
	// Show sets up a table's progress display on opts as its migration starts, and returns what
	// to call with its result when it ends.
	Show func(tg Target, opts *migration.Options) (done func(*migration.Result))

	// With Parallel > 1: one throttle and one metrics endpoint for all the tables.
	throttle *throttle.Throttler
	board    *control.Board
	// catalog: one read of the server-wide lookups, and of the statement digests, for every
	// table's preflight (plan.Catalog).
	catalog *plan.Catalog
}

// Run runs the targets and returns the results, one summary line per target, and the first
// failure in plan order (failed names its table; empty with a non-nil error: the run could not
// start or a table's options were wrong).
func (r *Runner) Run(ctx context.Context, targets []Target) ([]*migration.Result, []Outcome, string, error) {
	if r.Parallel > 1 {
		stop, err := r.shared(ctx, targets[0])
		if err != nil {
			return nil, nil, "", err
		}
		defer stop()
	}
	// A failed read leaves each table to read its own, whose error names what failed.
	if cat, err := plan.LoadCatalog(ctx, r.DB); err == nil {
		cat.ShareDigests()
		r.catalog = cat
	}
	results := make([]*migration.Result, len(targets))
	lines := make([]Outcome, len(targets))
	errs := make([]error, len(targets))
	var mu sync.Mutex
	stopped := false
	var g errgroup.Group
	g.SetLimit(r.Parallel)
	for i, tg := range targets {
		g.Go(func() error {
			mu.Lock()
			skip := stopped
			mu.Unlock()
			if skip {
				lines[i] = Outcome{Table: tg.String(), Outcome: "not-reached", Reason: "the plan stops at the first failure"}
				return nil
			}
			results[i], lines[i], errs[i] = r.one(ctx, tg)
			if errs[i] != nil {
				mu.Lock()
				stopped = true
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	var done []*migration.Result
	for i, err := range errs {
		if err != nil {
			var usage *setupError
			if errors.As(err, &usage) {
				return nil, nil, "", usage.err
			}
			name := targets[i].String()
			return done, lines, name, fmt.Errorf("%s: %w", name, err)
		}
		if results[i] != nil && lines[i].Outcome == "converted" {
			done = append(done, results[i])
		}
	}
	return done, lines, "", nil
}

// setupError is a failure before a table's migration started (bad flags): the whole run stops
// with it, as before any table ran.
type setupError struct{ err error }

func (e *setupError) Error() string { return e.err.Error() }

// shared starts the throttle and the metrics endpoint the parallel tables share.
func (r *Runner) shared(ctx context.Context, first Target) (func(), error) {
	opts, err := r.Options(first)
	if err != nil {
		return nil, err
	}
	opts.Logger = r.Logger
	thr, stopThrottle, err := migration.StartThrottle(ctx, r.DB, opts)
	if err != nil {
		return nil, outcome.New(outcome.Refused, err, "")
	}
	r.throttle = thr
	if opts.MetricsListen == "" {
		return stopThrottle, nil
	}
	r.board = &control.Board{}
	m, err := control.ServeBoard(opts.MetricsListen, r.board.Statuses)
	if err != nil {
		stopThrottle()
		return nil, outcome.New(outcome.Usage, err, "choose another --metrics-listen address")
	}
	r.Logger.Info("metrics served", "url", "http://"+m.Addr()+"/metrics")
	return func() { m.Close(); stopThrottle() }, nil
}

// one converts one table (or finds it converted by this plan already).
func (r *Runner) one(ctx context.Context, tg Target) (*migration.Result, Outcome, error) {
	name := tg.String()
	if r.Plan {
		if done, why, err := converted(ctx, r.DB, r.StateSchema, tg); err != nil {
			return nil, Outcome{}, &setupError{err}
		} else if done {
			r.Logger.Info("already converted: skipping", slog.String("table", name), slog.String("by", why))
			return nil, Outcome{Table: name, Outcome: "already-converted", Reason: why}, nil
		}
	}
	opts, err := r.Options(tg)
	if err != nil {
		return nil, Outcome{}, &setupError{err}
	}
	opts.Catalog = r.catalog
	finish := r.Show(tg, &opts)
	if r.Parallel > 1 {
		opts.Throttle, opts.Board, opts.MetricsListen = r.throttle, r.board, ""
		opts.Alongside = r.Parallel
	}
	opts.Logger.Debug("starting apply", slog.Bool("dry_run", opts.DryRun), slog.Duration("chunk_time", opts.ChunkTime),
		slog.String("state_schema", opts.StateSchema), slog.Int("replicas", len(opts.Replicas)))
	res, err := migration.Run(ctx, r.DB, opts)
	finish(res)
	if err != nil {
		return res, Outcome{Table: name, Outcome: "failed", Reason: err.Error()}, err
	}
	return res, Outcome{Table: name, Outcome: "converted", Rows: res.RowsCopied, Time: res.TotalTime, LockHeld: lockHeld(res),
		Estimate: res.Estimate}, nil
}

// converted says whether a plan run finds the table done: InnoDB now, and enginemig's last
// record of it a completed conversion (a re-run of a plan that was interrupted skips it).
func converted(ctx context.Context, db *sql.DB, stateSchema string, tg Target) (bool, string, error) {
	ti, err := table.Load(ctx, db, tg.Schema, tg.Table)
	if err != nil || !strings.EqualFold(ti.Engine, "InnoDB") {
		return false, "", nil
	}
	store := state.NewStore(db, state.Resolve(ctx, db, stateSchema, tg.Schema, false))
	if ok, err := store.Exists(ctx); err != nil || !ok {
		return false, "", err
	}
	states, err := store.List(ctx, tg.Schema, tg.Table)
	if err != nil || len(states) == 0 || states[0].Stage != state.StageDone {
		return false, "", err
	}
	return true, fmt.Sprintf("converted by migration #%d", states[0].ID), nil
}

func lockHeld(r *migration.Result) time.Duration {
	if r.Cutover == nil {
		return 0
	}
	return r.Cutover.LockHeld
}
