// Package rollback swaps a converted table back to its kept MyISAM original without losing the
// writes made since the cut-over.
package rollback

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/carry"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/shadow"
)

// Options configure a rollback.
type Options struct {
	Conn        dbconn.Config
	Schema      string
	Table       string
	StateSchema string
	Cutover     cutover.Config
	ServerID    uint32
	Logger      *slog.Logger // nil discards
	// LockTimeout bounds a wait for a lock another session holds (lockwait.DefaultTimeout when 0):
	// waits are reported as apply's are (lockwait.Watcher).
	LockTimeout time.Duration
}

// Result summarises a rollback.
type Result struct {
	Schema         string          `json:"schema"`
	Table          string          `json:"table"`
	MigrationID    int64           `json:"migration_id"`
	CaptureChanges int64           `json:"capture_changes"`
	Cutover        *cutover.Result `json:"cutover"`
	// InnoDBTable is where the converted table now is (kept, like the original was).
	InnoDBTable string        `json:"innodb_table"`
	TotalTime   time.Duration `json:"total_ns"`
}

// Run swaps a converted table back to its kept MyISAM original without losing writes made
// since the cut-over. With binlog capture it replays the binlog from the recorded cut-over
// position onto `_t_old` (and refuses, changing nothing, when that binlog is gone); with trigger
// capture it notes changes with triggers on the converted table and verifies `_t_old` against it
// chunk by chunk, recopying what differs. Then it swaps the two with the same sentry method.
func Run(ctx context.Context, db *sql.DB, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	opts.StateSchema = state.Resolve(ctx, db, opts.StateSchema, opts.Schema, false)
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	var swapping atomic.Bool // from the swap on, a timeout would no longer leave things as they were
	w := lockwait.NewWatcher(lockwait.WatchConfig{DB: db, Own: opts.Conn.IsOwn(), Tables: lockwait.TablesOf(opts.Schema, table.RunNames(opts.Table)),
		Logger: opts.Logger, Timeout: opts.LockTimeout, Abort: abort, Unchanged: "nothing was swapped back: the InnoDB table is live",
		Enforce: func() bool { return !swapping.Load() }})
	stop := w.Start(ctx, nil)
	res, err := rollback(ctx, db, opts, &swapping)
	stop()
	if lt := w.TimeoutErr(); err != nil && lt != nil {
		return nil, lt
	}
	return res, err
}

func rollback(ctx context.Context, db *sql.DB, opts Options, swapping *atomic.Bool) (*Result, error) {
	start := time.Now()
	st, err := lastCutover(ctx, db, opts)
	if err != nil {
		return nil, err
	}
	version, _, _, err := preflight.CheckServer(ctx, db, string(st.CaptureMode()))
	if err != nil {
		return nil, err
	}
	if dbconn.GaleraNode(ctx, db) {
		if err := prepareGalera(ctx, db, &opts, st); err != nil {
			return nil, err
		}
	}
	swapping.Store(true) // an interrupted rollback may be past its swap
	if res, done, err := finishInterruptedRollback(ctx, db, opts, st); err != nil || done {
		return res, err
	}
	swapping.Store(false)
	cur, err := checkRollback(ctx, db, opts)
	if err != nil {
		return nil, err
	}
	from := st.CaptureCutover
	if why, remedy, err := shadow.CheckResume(ctx, db, st.CaptureMode(), from); err != nil {
		return nil, err
	} else if why != "" {
		return nil, preflight.Refuse("a lossless rollback needs every change since the cut-over; "+remedy+" next time. Swapping back by hand would lose the writes made since then",
			"%s", why)
	}
	// The converted table's triggers (as they are now) go back with it; the stream steps over the
	// apply's own trigger statements after its swap, and the check under the lock catches changes.
	trs, err := table.LoadTriggers(ctx, db, opts.Schema, opts.Table)
	if err != nil {
		return nil, err
	}
	carrier := &carry.Carrier{DB: db, Schema: opts.Schema, Live: opts.Table, Triggers: trs, Log: opts.Logger, LockWithin: opts.LockTimeout}
	res, err := swapBack(ctx, db, opts, st, cur, version, from, carrier, swapping)
	if err != nil {
		return res, err
	}
	res.TotalTime = time.Since(start)
	return res, nil
}

// swapBack runs the same pipeline as apply, the other way round and without a copy: the kept
// original is the target, the converted table the source.
func swapBack(ctx context.Context, db *sql.DB, opts Options, st *state.State, cur *table.Info, version string, from shadow.Position, carrier *carry.Carrier, swapping *atomic.Bool) (*Result, error) {
	oldName, innoName := table.OldName(opts.Table), table.ShadowName(opts.Table)
	ignore := isCutoverRename(opts.Table)
	cfg := rollbackCapture(db, cur, st.CaptureMode())
	cfg.Conn, cfg.Version, cfg.ServerID, cfg.Start, cfg.Logger = opts.Conn, version, opts.ServerID, from, opts.Logger
	cfg.LockWithin = lockwait.TimeoutOr(opts.LockTimeout)
	cfg.IgnoreQuery = func(q string) bool { return ignore(q) || isTriggerDDL(q) }
	pipe, err := shadow.Open(ctx, cfg)
	if err != nil {
		return nil, outcome.New(outcome.FailedSafe, err, "")
	}
	defer pipe.Close()
	// Whatever happens next, what the capture set up leaves the converted table with this run.
	defer func() {
		if err := pipe.Remove(context.WithoutCancel(ctx)); err != nil {
			opts.Logger.Warn("could not remove the rollback's capture triggers; `enginemig cleanup` removes them", "error", err)
		}
	}()
	if err := catchUpBack(ctx, pipe, from, oldName, opts.Logger); err != nil {
		return nil, err
	}
	sw := cutover.Swap{Schema: opts.Schema, From: opts.Table, To: oldName, Aside: innoName, Sentry: table.SwapName(opts.Table), LockWith: pipe.SwapLockWith()}
	galeraGate(opts, &sw)
	swapping.Store(true)
	cut, err := cutover.Run(ctx, db, sw, pipe, opts.Cutover, rollbackHook{carrier, oldName})
	late := errors.As(err, new(*cutover.SwappedError)) // swapped, but To may lack the last changes
	if err != nil && !late {
		return nil, swapBackFailed(err, sw)
	}
	pipe.StopAfterSwap()
	if cerr := carrier.Finish(context.WithoutCancel(ctx)); errors.Is(cerr, carry.ErrSimulatedCrash) {
		return nil, cerr
	} else if cerr != nil {
		const remedy = "every trigger still fires through its stand-in; run the same rollback again to finish"
		if late {
			return nil, swapBackFailed(fmt.Errorf("%w; carrying the triggers stopped too (%v: %s)", err, cerr, remedy), sw)
		}
		return nil, outcome.New(outcome.NeedsAttention, fmt.Errorf("swapped back, but carrying the triggers stopped: %w", cerr), remedy)
	}
	if late {
		recordRolledBack(ctx, db, opts, st, fmt.Sprintf("rolled back late; InnoDB table kept as %s: %v", innoName, err))
		return nil, swapBackFailed(err, sw)
	}
	at := "rolled back"
	if cut.Position != "" {
		at += " at " + cut.Position
	}
	recordRolledBack(ctx, db, opts, st, fmt.Sprintf("%s; InnoDB table kept as %s", at, innoName))
	return &Result{Schema: opts.Schema, Table: opts.Table, MigrationID: st.ID, CaptureChanges: pipe.Progress().Capture.Changes,
		Cutover: &cut, InnoDBTable: innoName}, nil
}

// catchUpBack brings the kept original up to date before the swap-back (shadow.Pipeline.Reconcile:
// a capture from the cut-over's position catches up; one that started now verifies the whole
// table, recopying the chunks that differ).
func catchUpBack(ctx context.Context, pipe *shadow.Pipeline, from shadow.Position, oldName string, log *slog.Logger) error {
	log.Info("bringing the kept original up to date with the converted table", "from", orNone(string(from)), "table", oldName)
	v, err := pipe.Reconcile(ctx, copier.Pace{ChunkTime: copier.DefaultChunkTime})
	if err != nil {
		return outcome.New(outcome.FailedSafe, fmt.Errorf("bring %s up to date: %w", oldName, err), "nothing was swapped; the InnoDB table is live")
	}
	if v != nil {
		log.Info("verified; swapping back", "rows", v.Rows, "recopied_chunks", v.Repaired, "took", v.Duration.Round(time.Millisecond))
		return nil
	}
	log.Info("caught up; swapping back", "changes", pipe.Progress().Capture.Changes)
	return nil
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = dbconn.Logger(nil)
	}
	if o.Cutover.LockWait == 0 { // not configured
		o.Cutover = cutover.DefaultConfig()
	}
	if o.Cutover.Logger == nil {
		o.Cutover.Logger = o.Logger
	}
	if o.ServerID == 0 {
		o.ServerID = 1<<30 + rand.Uint32N(1<<30)
	}
	return o
}

// checkRollback refuses, changing nothing, unless the table is the converted InnoDB table, its
// kept MyISAM original is there with the same columns, and the InnoDB table's kept name is free.
// It returns the converted table.
func checkRollback(ctx context.Context, db *sql.DB, opts Options) (*table.Info, error) {
	cur, err := preflight.LoadTable(ctx, db, opts.Schema, opts.Table)
	if err != nil {
		return nil, err
	}
	oldName, innoName := table.OldName(opts.Table), table.ShadowName(opts.Table)
	old, err := table.Load(ctx, db, opts.Schema, oldName)
	switch {
	case errors.Is(err, table.ErrNotFound):
		return nil, preflight.Refuse("without it there is nothing to roll back to", "the kept original %s is gone", dbconn.QualifiedName(opts.Schema, oldName))
	case err != nil:
		return nil, err
	case cutover.IsSentry(ctx, db, opts.Schema, oldName):
		return nil, preflight.Refuse("drop the sentry (DROP TABLE "+dbconn.QualifiedName(opts.Schema, oldName)+") only if no enginemig runs on this table",
			"%s is a cut-over sentry, not the kept original", dbconn.QualifiedName(opts.Schema, oldName))
	case !strings.EqualFold(cur.Engine, "InnoDB"):
		return nil, preflight.Refuse("nothing to roll back", "%s is %s, not the converted InnoDB table", cur.QuotedName(), cur.Engine)
	}
	if _, err := table.Load(ctx, db, opts.Schema, innoName); err == nil {
		return nil, preflight.Refuse("drop or rename it first", "%s exists; rollback moves the InnoDB table to that name", dbconn.QualifiedName(opts.Schema, innoName))
	}
	if len(old.CopyColumns()) != len(cur.CopyColumns()) {
		return nil, preflight.Refuse("the tables' columns differ (DDL since the cut-over?): roll back by hand", "%s and %s have different columns", cur.QuotedName(), old.QuotedName())
	}
	return cur, nil
}

// lastCutover finds the newest completed, not rolled-back migration of the table.
func lastCutover(ctx context.Context, db *sql.DB, opts Options) (*state.State, error) {
	states, err := state.NewStore(db, opts.StateSchema).List(ctx, opts.Schema, opts.Table)
	if err != nil {
		return nil, preflight.Refuse("rollback needs the state table written by apply (see --state-schema)", "no migration state: %v", err)
	}
	for i := range states {
		switch states[i].Stage {
		case state.StageDone:
			if !shadow.Recorded(states[i].CaptureMode(), states[i].CaptureCutover) {
				break // no position to capture from: not a conversion rollback can start from
			}
			return &states[i], nil
		case state.StageRolledBack:
			return nil, preflight.Refuse("nothing to do", "the last conversion of %s.%s was already rolled back", opts.Schema, opts.Table)
		}
	}
	return nil, preflight.Refuse("rollback applies to tables converted by enginemig apply", "no completed conversion of %s.%s is recorded", opts.Schema, opts.Table)
}

// isCutoverRename recognises the migration's own swap, which the rollback stream starts just before.
func isCutoverRename(name string) func(string) bool {
	// The names as the statement text spells them: a backtick inside a quoted name is doubled.
	asWritten := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "`", "``")) }
	old, shadow := asWritten(table.OldName(name)), asWritten(table.ShadowName(name))
	return func(q string) bool {
		l := strings.ToLower(q)
		swap := asWritten(table.SwapName(name))
		return strings.Contains(l, "rename table") && (strings.Contains(l, shadow) || strings.Contains(l, old)) &&
			(strings.Contains(l, swap) || strings.Contains(l, old))
	}
}

func recordRolledBack(ctx context.Context, db *sql.DB, opts Options, st *state.State, what string) {
	now := time.Now().UTC()
	st.Stage, st.FinishedAt, st.Error = state.StageRolledBack, &now, what
	if err := state.NewStore(db, opts.StateSchema).Save(context.WithoutCancel(ctx), st); err != nil {
		opts.Logger.Warn("rolled back, but could not record it in the state table", "error", err)
	}
}

// finishInterruptedRollback completes a rollback that died after its swap-back but before its
// triggers had their own names again: the table is MyISAM, the InnoDB table is kept as `_t_new`,
// and stand-ins are on the table (every trigger still fires once, through them). Their definitions
// are recovered from the stand-ins. done is false when there is no such rollback to finish.
func finishInterruptedRollback(ctx context.Context, db *sql.DB, opts Options, st *state.State) (*Result, bool, error) {
	cur, err := table.Load(ctx, db, opts.Schema, opts.Table)
	if err != nil || !strings.EqualFold(cur.Engine, "MyISAM") {
		return nil, false, nil
	}
	if inno, err := table.Load(ctx, db, opts.Schema, table.ShadowName(opts.Table)); err != nil || !strings.EqualFold(inno.Engine, "InnoDB") {
		return nil, false, nil
	}
	on, err := table.LoadTriggers(ctx, db, opts.Schema, opts.Table)
	if err != nil {
		return nil, false, err
	}
	var trs []table.Trigger
	for _, s := range on {
		if tr, ok := table.FromStandIn(s); ok {
			trs = append(trs, tr)
		}
	}
	if len(trs) == 0 {
		return nil, false, nil
	}
	opts.Logger.Info("finishing an interrupted rollback: giving the triggers their own names", "triggers", len(trs))
	c := &carry.Carrier{DB: db, Schema: opts.Schema, Live: opts.Table, Triggers: trs, Log: opts.Logger, LockWithin: opts.LockTimeout}
	if err := c.Finish(ctx); err != nil {
		return nil, false, outcome.New(outcome.NeedsAttention, fmt.Errorf("finish the interrupted rollback's triggers: %w", err), "")
	}
	recordRolledBack(ctx, db, opts, st, "rolled back (triggers finished by a second run); InnoDB table kept as "+table.ShadowName(opts.Table))
	return &Result{Schema: opts.Schema, Table: opts.Table, MigrationID: st.ID, InnoDBTable: table.ShadowName(opts.Table)}, true, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
