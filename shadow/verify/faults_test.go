package verify_test

import (
	"context"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/shadow"
	"github.com/enginemig/enginemig/shadow/verify"
)

// withHooks is ctx carrying h to verification and the pipeline around it.
func withHooks(ctx context.Context, h faults.Hooks) context.Context {
	s := h.Set()
	return verify.WithFaults(shadow.WithFaults(copier.WithFaults(ctx, s), s), s)
}
