// Package faults holds a run's test seams: simulated crashes and deliberately slowed steps. Only
// tests set them; the shipped binary passes none (a nil *Faults), and no flag reaches them.
package faults

import (
	"errors"
	"time"

	"github.com/enginemig/enginemig/outcome"
)

// ErrCrash is what a simulated crash returns: the run stops where it is, cleaning nothing up, as
// if the process had died there.
var ErrCrash = outcome.New(outcome.NeedsAttention, errors.New("simulated crash (test)"), "")

// Faults are the seams of one run. A nil *Faults is none.
type Faults struct {
	// CrashAtTrigger dies in the trigger step right after creating real trigger n (from 1).
	CrashAtTrigger int
	// ReplayDelay pauses before each replayed batch (shadow.Config.ApplyDelay), to keep replay
	// behind the application's writes.
	ReplayDelay time.Duration
	// AllIndexesUpFront creates the shadow with every index, as on a Galera node, on any server:
	// the copy and replay then run against unique secondary indexes (shadow/order.go, "unique
	// secondary indexes").
	AllIndexesUpFront bool
}

// Replay is ReplayDelay (0 when there are no faults).
func (f *Faults) Replay() time.Duration {
	if f == nil {
		return 0
	}
	return f.ReplayDelay
}

// AfterTrigger is carry.Carrier.AfterCreate for CrashAtTrigger (nil when there is none).
func (f *Faults) AfterTrigger() func(n int) error {
	if f == nil || f.CrashAtTrigger == 0 {
		return nil
	}
	at := f.CrashAtTrigger
	return func(n int) error {
		if n == at {
			return ErrCrash
		}
		return nil
	}
}
