package cutover

import (
	"context"
	"time"
)

// Faults is what a test may watch or shorten in a swap; only tests set it (WithFaults), and
// without it the swap runs as if it did not exist. The values are documented where the tests
// define them (internal/testkit/faults).
type Faults interface {
	OnLocked() func()
	OnRenameQueued() func(lockConnID int64)
	GateWait() time.Duration
}

type faultsKey struct{}

// WithFaults returns ctx carrying f for the swaps run under it.
func WithFaults(ctx context.Context, f Faults) context.Context {
	return context.WithValue(ctx, faultsKey{}, f)
}

func faultsOf(ctx context.Context) Faults {
	if f, ok := ctx.Value(faultsKey{}).(Faults); ok {
		return f
	}
	return noFaults{}
}

type noFaults struct{}

func (noFaults) OnLocked() func()                       { return nil }
func (noFaults) OnRenameQueued() func(lockConnID int64) { return nil }
func (noFaults) GateWait() time.Duration                { return 0 }
