package migration

import (
	"context"
	"errors"
	"fmt"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/carry"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/state"
)

// loadTriggers reads the triggers to carry: those of the table now, or, when resuming, those the
// interrupted run recorded at its start (the copy and the checks under the lock compare with them).
func (m *migrator) loadTriggers(ctx context.Context) error {
	if m.resume != nil {
		m.triggers = m.resume.Triggers
		return nil
	}
	trs, err := table.LoadTriggers(ctx, m.db, m.ti.Schema, m.ti.Name)
	if err != nil {
		return err
	}
	for _, tr := range trs {
		if why := tr.Carryable(m.ti.Schema, m.ti.Name); why != "" {
			return preflight.Refuse("recreate the trigger with character_set_client=utf8mb4, or drop it, convert, and create it again", "%s", why)
		}
	}
	m.triggers = trs
	return nil
}

func (m *migrator) carrier() *carry.Carrier {
	return &carry.Carrier{DB: m.db, Schema: m.ti.Schema, Live: m.ti.Name, Triggers: m.triggers, Log: m.log, LockWithin: m.opts.LockTimeout}
}

// swapHook takes part in each cut-over attempt: it installs the triggers' stand-ins on the shadow
// (carry.Carrier.PrepareSwap says whether before the lock or under it); under the lock it checks
// that the triggers did not change and records the swap position.
type swapHook struct{ m *migrator }

func (h swapHook) PrepareSwap(ctx context.Context) error {
	return h.m.carrier().PrepareSwap(ctx, table.ShadowName(h.m.ti.Name))
}

func (h swapHook) AbandonSwap(ctx context.Context) {
	h.m.carrier().AbandonSwap(ctx, table.ShadowName(h.m.ti.Name))
}

func (h swapHook) RecordSwap(ctx context.Context, pos string) error {
	if err := h.m.carrier().UnderLock(ctx, table.ShadowName(h.m.ti.Name)); err != nil {
		return err
	}
	return h.m.rec.RecordSwap(ctx, pos)
}

// finishTriggers is the stage after the swap: the triggers get their own names on the new table.
// A failure here leaves the migration in progress (the table is converted and every trigger
// fires through its stand-in): running the same apply again finishes it.
func (m *migrator) finishTriggers(ctx context.Context) error {
	if err := m.carrier().Finish(ctx); errors.Is(err, errSimulatedCrash) {
		return err
	} else if err != nil {
		m.rec.update(ctx, func(st *state.State) { st.Error = "triggers: " + err.Error() })
		return &settled{outcome.New(outcome.NeedsAttention, fmt.Errorf("the table is converted, but carrying its triggers stopped: %w", err),
			"every trigger still fires through its stand-in; run the same apply again to finish")}
	}
	for _, tr := range m.triggers {
		m.res.Triggers = append(m.res.Triggers, tr.Name)
	}
	return nil
}

func triggerNames(trs []table.Trigger) []string {
	var out []string
	for _, tr := range trs {
		out = append(out, tr.Name)
	}
	return out
}
