package migration

import (
	"context"
	"fmt"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/plan"
)

// preflight is the first stage: the checks, the table's advisory lock (held until the run ends),
// settling an interrupted run (resumed, or finished: then settledDone ends the run), the shadow's
// DDL, and plan's copy estimate. Nothing is created before it passes.
func (m *migrator) preflight(ctx context.Context) error {
	version, capture, why, err := preflight.CheckServer(ctx, m.db, m.opts.Capture)
	if err != nil {
		return err
	}
	m.version, m.capture = version, capture
	ti, err := preflight.LoadTable(ctx, m.db, m.opts.Schema, m.opts.Table)
	if err != nil {
		return err
	}
	lock, err := state.Lock(ctx, m.opts.Conn, ti.Schema, ti.Name)
	if err != nil {
		return err
	}
	m.onExit(func() { lock.Close() })

	// An earlier run that died leaves its record in progress: resume it, or settle it first.
	store := state.NewStore(m.db, m.opts.StateSchema)
	if prev, err := store.Unfinished(ctx, m.opts.Schema, m.opts.Table); err != nil {
		return err
	} else if prev != nil {
		resume, done, err := m.settleInterrupted(ctx, store, prev)
		if err != nil {
			return outcome.New(outcome.NeedsAttention, fmt.Errorf("settle interrupted migration #%d: %w", prev.ID, err), "")
		}
		if done {
			m.settledDone = &Result{Schema: ti.Schema, Table: ti.Name, ID: prev.ID, OldTable: table.OldName(ti.Name)}
			return nil
		}
		if ti, err = preflight.LoadTable(ctx, m.db, m.opts.Schema, m.opts.Table); err != nil {
			return err
		}
		m.resume = resume
		if resume != nil && resume.CaptureMode() != capture {
			m.capture, why = resume.CaptureMode(), "the interrupted run being resumed used it"
		}
	}
	m.log.Info("capturing changes with "+string(m.capture), "why", why)
	m.ti = ti
	if m.resume == nil {
		if err := preflight.CheckTable(ctx, m.db, ti); err != nil {
			return err
		}
	}
	server, estimate, err := preflight.PlanBlockers(ctx, m.db, ti, m.capture, preflight.Connections(m.opts.CopyWorkers, m.opts.Alongside), m.opts.Catalog, m.opts.MaxHold, m.log)
	if err != nil {
		return err
	}
	m.budget = hourlyBudget(m.opts.Conn, server.Account)
	if without := plan.WithoutPerformanceSchema(server); without != "" {
		m.log.Info("performance_schema is off: " + without)
	}
	if err := m.loadTriggers(ctx); err != nil {
		return err
	}
	if m.ddl, err = ti.Shadow(table.ShadowName(ti.Name), !faultsOf(ctx).AllIndexesUpFront(), !m.opts.KeepKeyless && table.RowIDSupported(m.version)); err != nil {
		return outcome.New(outcome.Refused, err, "")
	}
	if server.VarOn("wsrep_on") {
		if err := m.prepareGalera(ctx, ti, server); err != nil {
			return err
		}
	}
	m.deferred = m.ddl.Deferred
	m.res = &Result{Schema: ti.Schema, Table: ti.Name, DryRun: m.opts.DryRun, DeferredIndex: len(m.ddl.Deferred), ShadowChanges: m.ddl.Changes}
	if m.resume == nil {
		m.estimate(estimate)
	}
	return nil
}

// begin starts the run's record (or takes over the interrupted run's) and runs the start hook.
// A failed hook is settled here: the run ends with its error.
func (m *migrator) begin(ctx context.Context) error {
	store := state.NewStore(m.db, m.opts.StateSchema)
	if err := store.Ensure(ctx); err != nil {
		return outcome.New(outcome.Refused, err, "")
	}
	var err error
	if m.rec, err = startRecord(ctx, store, m.resume, state.State{Schema: m.ti.Schema, Table: m.ti.Name, Stage: state.StagePreflight,
		DryRun: m.opts.DryRun, RowsTotal: m.ti.Rows, Triggers: m.triggers, Capture: m.capture}, m.log); err != nil {
		return outcome.New(outcome.Refused, err, "")
	}
	m.rec.waits = m.ctl.waits
	m.recLive.Store(m.rec)
	m.res.ID = m.rec.snapshot().ID
	if m.resume != nil {
		m.log.Info("resuming migration", "id", m.resume.ID, "stage", m.resume.Stage,
			"copy_watermark", orNone(m.resume.Watermark), "capture_resume", orNone(string(m.resume.CaptureResume)))
	}
	if err := m.hook(ctx, PointStart); err != nil {
		return m.fail(ctx, outcome.New(outcome.FailedSafe, err, ""), m.resume != nil)
	}
	return nil
}
