package cutover

import (
	"context"

	"github.com/enginemig/enginemig/internal/testkit/faults"
)

// withHooks is ctx carrying h to the swaps run under it.
func withHooks(ctx context.Context, h faults.Hooks) context.Context { return WithFaults(ctx, h.Set()) }
