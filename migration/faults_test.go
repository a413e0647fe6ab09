package migration

import (
	"context"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/migration/carry"
	"github.com/enginemig/enginemig/shadow"
	"github.com/enginemig/enginemig/shadow/verify"
)

// withHooks is ctx carrying h to every package a run goes through (each reads its own Faults).
func withHooks(ctx context.Context, h faults.Hooks) context.Context {
	s := h.Set()
	ctx = copier.WithFaults(ctx, s)
	ctx = cutover.WithFaults(ctx, s)
	ctx = shadow.WithFaults(ctx, s)
	ctx = verify.WithFaults(ctx, s)
	ctx = carry.WithFaults(ctx, s)
	return WithFaults(ctx, s)
}
