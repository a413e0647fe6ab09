package shadow

import (
	"context"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/shadow/verify"
)

// withHooks is ctx carrying h to the pipeline, its copy and its verification.
func withHooks(ctx context.Context, h faults.Hooks) context.Context {
	s := h.Set()
	return verify.WithFaults(copier.WithFaults(WithFaults(ctx, s), s), s)
}
