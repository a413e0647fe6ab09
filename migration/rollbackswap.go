package migration

import (
	"context"
	"regexp"

	"github.com/enginemig/enginemig/carry"
)

// rollbackHook does for the rollback's swap what swapHook does for apply's, with the stand-ins on
// the kept original.
type rollbackHook struct {
	c       *carry.Carrier
	onTable string
}

func (h rollbackHook) PrepareSwap(ctx context.Context) error {
	return h.c.PrepareSwap(ctx, h.onTable)
}
func (h rollbackHook) AbandonSwap(ctx context.Context) { h.c.AbandonSwap(ctx, h.onTable) }
func (h rollbackHook) RecordSwap(ctx context.Context, _ string) error {
	return h.c.CheckUnchanged(ctx)
}

var triggerDDL = regexp.MustCompile(`(?is)^\s*(/\*.*?\*/\s*)*(CREATE\b.*?\bTRIGGER\b|DROP\s+TRIGGER\b)`)

// isTriggerDDL recognises CREATE TRIGGER and DROP TRIGGER statements.
func isTriggerDDL(q string) bool { return triggerDDL.MatchString(q) }
