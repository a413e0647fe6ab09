package verify

import (
	"context"
	"time"
)

// Faults is what a test may force or slow in verification; only tests set it (WithFaults), and
// without it verification runs as if it did not exist. The values are documented where the tests
// define them (internal/testkit/faults).
type Faults interface {
	VerifyRelease() int // 0: as verification decides; 1: always release early; 2: never
	VerifyHold() time.Duration
}

const (
	forceAlways = 1
	forceNever  = 2
)

type faultsKey struct{}

// WithFaults returns ctx carrying f for the verification run under it.
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

func (noFaults) VerifyRelease() int        { return 0 }
func (noFaults) VerifyHold() time.Duration { return 0 }
