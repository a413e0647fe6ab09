package rollback

import (
	"context"
	"database/sql"
	"regexp"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/carry"
	"github.com/enginemig/enginemig/shadow"
)

// rollbackHook takes part in each attempt of the swap back: the triggers' stand-ins go on the
// kept original (before the lock or under it: carry.Carrier.PrepareSwap), and under the lock the
// triggers must be as they were.
type rollbackHook struct {
	c       *carry.Carrier
	onTable string
}

func (h rollbackHook) PrepareSwap(ctx context.Context) error {
	return h.c.PrepareSwap(ctx, h.onTable)
}
func (h rollbackHook) AbandonSwap(ctx context.Context) { h.c.AbandonSwap(ctx, h.onTable) }
func (h rollbackHook) RecordSwap(ctx context.Context, _ string) error {
	return h.c.UnderLock(ctx, h.onTable)
}

var triggerDDL = regexp.MustCompile(`(?is)^\s*(/\*.*?\*/\s*)*(CREATE\b.*?\bTRIGGER\b|DROP\s+TRIGGER\b)`)

// isTriggerDDL recognises CREATE TRIGGER and DROP TRIGGER statements.
func isTriggerDDL(q string) bool { return triggerDDL.MatchString(q) }

// rollbackCapture is where a rollback's capture runs: from the converted table back into the
// kept original.
func rollbackCapture(db *sql.DB, cur *table.Info, mode shadow.Mode) shadow.Config {
	return shadow.Config{DB: db, Source: cur, Target: table.OldName(cur.Name), Mode: mode, ChangeLog: table.ChangeLogName(cur.Name, true),
		Filled: true}
}
