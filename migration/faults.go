package migration

import (
	"context"
	"time"
)

// Faults is what a test may crash, slow or force in the runner's own stages; only tests set it
// (WithFaults), and without it a run goes as if it did not exist. The values are documented where
// the tests define them (internal/testkit/faults).
type Faults interface {
	CrashAfterRows() int64
	CrashAtStage() string
	SaveEvery() time.Duration
	AllIndexesUpFront() bool
	CopyChunkTime() time.Duration
	IdleChunkTime() time.Duration
	FirstChunk() int
}

type faultsKey struct{}

// WithFaults returns ctx carrying f for the runs under it.
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

func (noFaults) CrashAfterRows() int64        { return 0 }
func (noFaults) CrashAtStage() string         { return "" }
func (noFaults) SaveEvery() time.Duration     { return 0 }
func (noFaults) AllIndexesUpFront() bool      { return false }
func (noFaults) CopyChunkTime() time.Duration { return 0 }
func (noFaults) IdleChunkTime() time.Duration { return 0 }
func (noFaults) FirstChunk() int              { return 0 }
