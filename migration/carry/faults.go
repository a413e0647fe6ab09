package carry

import (
	"context"
	"errors"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

// Faults is what a test may crash in the trigger carry; only tests set it (WithFaults), and without
// it the carry runs as if it did not exist.
type Faults interface {
	CrashAtTrigger() int // Finish stops as if the process died right after creating trigger n (from 1)
}

// ErrSimulatedCrash is what a test's simulated crash stops a run with (here, in apply's stages and
// in rollback): the run leaves everything as a dead process would, for the next run to resume.
var ErrSimulatedCrash = outcome.New(outcome.NeedsAttention, errors.New("simulated crash (test)"), "")

type faultsKey struct{}

// WithFaults returns ctx carrying f for the carries run under it.
func WithFaults(ctx context.Context, f Faults) context.Context {
	return context.WithValue(ctx, faultsKey{}, f)
}

func crashAtTrigger(ctx context.Context) int {
	if f, ok := ctx.Value(faultsKey{}).(Faults); ok {
		return f.CrashAtTrigger()
	}
	return 0
}
