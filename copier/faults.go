package copier

import (
	"context"
	"time"
)

// Faults is what a test may force, slow or watch in the copy; only tests set it (WithFaults), and
// without it the copy runs as if it did not exist. The values are documented where the tests
// define them (internal/testkit/faults).
type Faults interface {
	CopyStage() int // 0: as the copy decides; 1: every chunk staged; 2: none
	CopyAlwaysParallel() bool
	OvertakeDelay() time.Duration
	ChunkLocked() func()
}

// The forced choices of Faults.CopyStage (and of verification's release, in its package).
const (
	forceAlways = 1
	forceNever  = 2
)

type faultsKey struct{}

// WithFaults returns ctx carrying f for the copy run under it.
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

func (noFaults) CopyStage() int               { return 0 }
func (noFaults) CopyAlwaysParallel() bool     { return false }
func (noFaults) OvertakeDelay() time.Duration { return 0 }
func (noFaults) ChunkLocked() func()          { return nil }
