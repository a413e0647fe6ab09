package shadow

import (
	"context"
	"time"
)

// Faults is what a test may slow, force or watch in keeping the shadow current; only tests set it
// (WithFaults), and without it the pipeline runs as if it did not exist. The values are documented
// where the tests define them (internal/testkit/faults).
type Faults interface {
	ReplayDelay() time.Duration
	SyncEvery() time.Duration
	Synced() func(notes int64)
	SyncLocked() func()
	VerifyRelease() int // 0: as verification decides; 1: always release early; 2: never
}

// forceNever is Faults.VerifyRelease's "never".
const forceNever = 2

type faultsKey struct{}

// WithFaults returns ctx carrying f for the pipeline run under it.
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

func (noFaults) ReplayDelay() time.Duration { return 0 }
func (noFaults) SyncEvery() time.Duration   { return 0 }
func (noFaults) Synced() func(int64)        { return nil }
func (noFaults) SyncLocked() func()         { return nil }
func (noFaults) VerifyRelease() int         { return 0 }
