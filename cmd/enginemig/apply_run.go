package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/control"
	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/throttle"
)

// applyRun converts the targets in plan order, up to parallel at a time. The first failure stops
// the plan: tables not started by then are not reached, those already running finish.
type applyRun struct {
	c        *cli.Context
	db       *sql.DB
	conn     dbconn.Config
	gates    map[migration.Point]bool
	gateCfg  bench.GateConfig
	planRun  bool
	parallel int

	// With parallel > 1: one throttle and one metrics endpoint for all the tables.
	throttle *throttle.Throttler
	board    *control.Board
	out      sync.Mutex // the result lines of tables that finish at the same time
}

// check refuses what parallel runs cannot do: one control socket controls one migration.
func (r *applyRun) check() error {
	switch {
	case r.parallel < 1:
		return outcome.New(outcome.Usage, errors.New("--parallel must be at least 1"), "")
	case r.parallel > 1 && !r.planRun:
		return outcome.New(outcome.Usage, errors.New("--parallel needs --plan"), "")
	case r.parallel > 1 && r.c.String("control-socket") != "":
		return outcome.New(outcome.Usage, errors.New("--control-socket controls one migration, not --parallel ones"),
			"drop --control-socket, or use --parallel 1")
	}
	return nil
}

// all runs the targets and returns the results, one summary line per target, and the first
// failure in plan order (failed names its table; empty with a non-nil error: the run could not
// start or a table's options were wrong).
func (r *applyRun) all(ctx context.Context, targets []target) ([]*migration.Result, []tableOutcome, string, error) {
	if r.parallel > 1 {
		stop, err := r.shared(ctx, targets[0])
		if err != nil {
			return nil, nil, "", err
		}
		defer stop()
	}
	results := make([]*migration.Result, len(targets))
	lines := make([]tableOutcome, len(targets))
	errs := make([]error, len(targets))
	var mu sync.Mutex
	stopped := false
	var g errgroup.Group
	g.SetLimit(r.parallel)
	for i, tg := range targets {
		g.Go(func() error {
			mu.Lock()
			skip := stopped
			mu.Unlock()
			if skip {
				lines[i] = tableOutcome{Table: tg.schema + "." + tg.table, Outcome: "not-reached", Reason: "the plan stops at the first failure"}
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
			name := targets[i].schema + "." + targets[i].table
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
func (r *applyRun) shared(ctx context.Context, first target) (func(), error) {
	opts, err := applyOptions(r.c, r.conn, first, r.gates, r.gateCfg)
	if err != nil {
		return nil, err
	}
	opts.Logger = loggerOf(r.c)
	thr, stopThrottle, err := migration.StartThrottle(ctx, r.db, opts)
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
	loggerOf(r.c).Info("metrics served", "url", "http://"+m.Addr()+"/metrics")
	return func() { m.Close(); stopThrottle() }, nil
}

// one converts one table (or finds it converted by this plan already).
func (r *applyRun) one(ctx context.Context, tg target) (*migration.Result, tableOutcome, error) {
	c, name := r.c, tg.schema+"."+tg.table
	if r.planRun {
		if done, why, err := alreadyConverted(ctx, r.db, c.String("state-schema"), tg); err != nil {
			return nil, tableOutcome{}, &setupError{err}
		} else if done {
			loggerOf(c).Info("already converted: skipping", slog.String("table", name), slog.String("by", why))
			return nil, tableOutcome{Table: name, Outcome: "already-converted", Reason: why}, nil
		}
	}
	opts, err := applyOptions(c, r.conn, tg, r.gates, r.gateCfg)
	if err != nil {
		return nil, tableOutcome{}, &setupError{err}
	}
	logger := loggerOf(c).With(slog.String("table", name))
	// Bars of tables running at once would overwrite each other: periodic lines instead.
	display := newProgressDisplay(c.App.ErrWriter, !c.Bool("no-progress") && r.parallel == 1, name)
	if r.parallel == 1 {
		onLog(c, display.clear)
		defer onLog(c, nil)
	}
	opts.Progress, opts.Logger = display.update, logger
	if r.parallel > 1 {
		opts.Throttle, opts.Board, opts.MetricsListen = r.throttle, r.board, ""
	}
	if h := c.String("hook"); h != "" {
		opts.Hook = migration.CommandHook(h, c.Duration("hook-timeout"), logger)
	}
	logger.Debug("starting apply", slog.Bool("dry_run", opts.DryRun), slog.Duration("chunk_time", opts.ChunkTime),
		slog.String("state_schema", opts.StateSchema), slog.Int("replicas", len(opts.Replicas)))
	res, err := migration.Run(ctx, r.db, opts)
	display.finish()
	if res != nil && c.String("output") == "text" {
		r.out.Lock()
		printApplyResult(c.App.Writer, res)
		r.out.Unlock()
	}
	if err != nil {
		return res, tableOutcome{Table: name, Outcome: "failed", Reason: err.Error()}, err
	}
	return res, tableOutcome{Table: name, Outcome: "converted", Rows: res.RowsCopied, Time: res.TotalTime, LockHeld: lockHeld(res),
		Estimate: res.Estimate}, nil
}
