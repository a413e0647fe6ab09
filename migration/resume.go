package migration

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/carry"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/shadow"
)

// settleInterrupted decides what to do with an interrupted migration: resume it (returns it),
// finish its bookkeeping when the swap had already happened (returns done=true), or abandon it
// cleanly so a new migration can start.
func (m *migrator) settleInterrupted(ctx context.Context, store *state.Store, prev *state.State) (resume *state.State, done bool, err error) {
	schema, name := m.opts.Schema, m.opts.Table
	shadowName, old := table.ShadowName(name), table.OldName(name)
	if err := m.settleSwapName(ctx); err != nil {
		return nil, false, err
	}
	cur, err := table.Load(ctx, m.db, schema, name)
	if err != nil {
		return nil, false, err
	}
	_, shadowErr := table.Load(ctx, m.db, schema, shadowName)
	hasShadow := shadowErr == nil
	oldTable, oldErr := table.Load(ctx, m.db, schema, old)

	abandon := func(why string) (*state.State, bool, error) {
		m.log.Info("settling an interrupted migration", "id", prev.ID, "stage", prev.Stage, "action", why)
		if err := shadow.Remove(ctx, applyCapture(m.db, cur, prev.CaptureMode())); err != nil {
			return nil, false, err
		}
		if hasShadow {
			if _, err := m.db.ExecContext(ctx, table.DropTable(schema, shadowName)); err != nil {
				return nil, false, err
			}
		}
		now := time.Now().UTC()
		prev.Stage, prev.Error, prev.FinishedAt = state.StageFailed, "interrupted; "+why, &now
		return nil, false, store.Save(ctx, prev)
	}

	switch {
	case strings.EqualFold(cur.Engine, "InnoDB") && !hasShadow && oldErr == nil && strings.EqualFold(oldTable.Engine, "MyISAM") &&
		shadow.Recorded(prev.CaptureMode(), prev.CaptureCutover):
		// The rename went through before the process died: the migration is complete once its
		// triggers have their own names on the new table.
		if len(prev.Triggers) > 0 {
			c := &carry.Carrier{DB: m.db, Schema: schema, Live: name, Triggers: prev.Triggers, Log: m.log, LockWithin: m.opts.LockTimeout}
			if err := c.Finish(ctx); err != nil {
				return nil, false, err
			}
		}
		if err := shadow.Remove(ctx, applyCapture(m.db, cur, prev.CaptureMode())); err != nil {
			return nil, false, err
		}
		now := time.Now().UTC()
		prev.Stage, prev.FinishedAt = state.StageDone, &now
		m.log.Info("the interrupted migration had completed its cut-over; recorded it as done", "id", prev.ID,
			"cutover", prev.CaptureCutover)
		return nil, true, store.Save(ctx, prev)
	case !hasShadow || !strings.EqualFold(cur.Engine, "MyISAM"):
		return abandon("nothing to resume; starting over")
	case prev.DryRun != m.opts.DryRun:
		return abandon("it was started with a different --dry-run; starting over")
	case cur.Keyless():
		// Its replay is not idempotent, and the saved position does not say which changes the
		// shadow already has (shadow/order.go, rule 5).
		return abandon("a table without a unique key copies again from the start")
	default:
		why, _, err := shadow.CheckResume(ctx, m.db, prev.CaptureMode(), prev.CaptureResume)
		if err != nil {
			return nil, false, err
		}
		if why != "" {
			return abandon(why + "; restarting the copy from the beginning")
		}
	}
	if err := m.stopOrphans(ctx, shadowName); err != nil {
		return nil, false, err
	}
	return prev, false, nil
}

// settleSwapName clears the swap's name: a sentry left by an interrupted cut-over is dropped,
// and an original left there by a swap that went through (the process died before moving it to
// its kept name) is moved there.
func (m *migrator) settleSwapName(ctx context.Context) error {
	schema, swap, old := m.opts.Schema, table.SwapName(m.opts.Table), table.OldName(m.opts.Table)
	if cutover.IsSentry(ctx, m.db, schema, swap) {
		m.log.Info("removing the cut-over sentry left by the interrupted run", "sentry", swap)
		_, err := m.db.ExecContext(ctx, table.DropTable(schema, swap))
		return err
	}
	if _, err := table.Load(ctx, m.db, schema, swap); err == nil {
		m.log.Info("moving the original to its kept name (the interrupted run had swapped the tables)", "from", swap, "to", old)
		_, err := m.db.ExecContext(ctx, table.RenameTable(schema, swap, old))
		return err
	}
	return nil
}

// stopOrphans waits for statements of the dead run that still write to the shadow (a commit the
// server received just before the process died still runs), and kills them after a grace
// period, so that no old write can land after the resumed run's newer ones.
func (m *migrator) stopOrphans(ctx context.Context, shadow string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ids, err := cutover.LongQueries(ctx, m.db, m.opts.Schema, shadow, 0)
		if err != nil || len(ids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, id := range ids {
				m.log.Warn("killing a connection still writing to the shadow from the interrupted run", "connection", id, "shadow", shadow)
				m.db.ExecContext(ctx, table.KillConnection(id))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// prepareResume brings the shadow back to a state the resumed copy and replay can build on: it is
// rewound to the saved watermark (shadow.Rewind), and unique secondary indexes are dropped until
// replay has caught up again, because REPLACE on a table with other unique keys could delete rows
// while older changes are re-applied. It returns the index definitions still to build.
func (m *migrator) prepareResume(ctx context.Context, st *state.State, deferred []string) ([]string, error) {
	watermark, err := state.DecodeKey(st.Watermark)
	if err != nil {
		return nil, err
	}
	shadowName := table.ShadowName(m.ti.Name)
	// Rows above the watermark are the copy's to read again, unless the copy is over: then
	// replay wrote them and keeps them current.
	if st.Stage != state.StageCutover {
		if err := shadow.Rewind(ctx, m.db, m.ti, shadowName, watermark); err != nil {
			return nil, err
		}
	}
	// Stand-ins left on the shadow by a cut-over attempt never fire there, but each costs a query
	// per replayed row: the next attempt installs them again.
	c := &carry.Carrier{DB: m.db, Schema: m.ti.Schema, Live: m.ti.Name, Triggers: st.Triggers, Log: m.log, LockWithin: m.opts.LockTimeout}
	if err := c.DropStandIns(ctx, shadowName); err != nil {
		return nil, err
	}
	sh, err := table.Load(ctx, m.db, m.ti.Schema, shadowName)
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	for _, ix := range sh.Indexes {
		present[ix.Name] = true
	}
	var missing, dropUnique []string
	for _, def := range deferred {
		name, _ := table.IndexDefinitionName(def)
		switch {
		case !present[name]:
			missing = append(missing, def)
		case strings.HasPrefix(def, "UNIQUE KEY "):
			dropUnique = append(dropUnique, name)
			missing = append(missing, def)
		}
	}
	if len(dropUnique) > 0 {
		if _, err := m.db.ExecContext(ctx, table.DropIndexes(m.ti.Schema, shadowName, dropUnique)); err != nil {
			return nil, fmt.Errorf("resume: drop unique indexes until replay catches up: %w", err)
		}
	}
	return missing, nil
}

// errSimulatedCrash is what a test's simulated crash stops a run with (Faults).
var errSimulatedCrash = carry.ErrSimulatedCrash
