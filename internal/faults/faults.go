// Package faults holds a run's test seams: simulated crashes and deliberately slowed or forced
// steps. Only tests set them; the shipped binary passes none, and no flag reaches them.
package faults

import (
	"errors"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/shadow/verify"
)

// ErrCrash is what a simulated crash returns: the run stops where it is, cleaning nothing up, as
// if the process had died there.
var ErrCrash = outcome.New(outcome.NeedsAttention, errors.New("simulated crash (test)"), "")

// Faults are the seams of one run; the zero value (and a nil *Faults) is none.
type Faults struct {
	// Simulated crashes (ErrCrash): once this many rows are copied (after saving progress as the
	// periodic save would have), on entering the stage named, or in the trigger step right after
	// creating real trigger n (from 1).
	CrashAfterRows int64
	CrashAtStage   string
	CrashAtTrigger int
	// SaveEvery is how often progress is saved (the runner's default when 0).
	SaveEvery time.Duration
	// IdleChunkTime is copier.Pace.IdleChunkTime: equal to the chunk time, it keeps a copy slow.
	IdleChunkTime time.Duration
	// ReplayDelay pauses before each replayed batch, which keeps replay behind the source.
	ReplayDelay time.Duration
	// Stage, AlwaysParallel and OvertakeDelay are copier.Config's: which chunks are staged,
	// parallel chunks even while clients wait, and odd chunks held back so even ones overtake.
	Stage          copier.StagePolicy
	AlwaysParallel bool
	OvertakeDelay  time.Duration
	// VerifyRelease and VerifyHold are verify.Config's Release and HoldDelay: which verification
	// chunks let the source go early, and a pause while replay is held.
	VerifyRelease verify.Release
	VerifyHold    time.Duration
	// AllIndexesUpFront creates the shadow with every index, as on a Galera node, on any server:
	// the copy and replay then run against unique secondary indexes (shadow/order.go, "unique
	// secondary indexes").
	AllIndexesUpFront bool
	// SyncLocked is called by each sync trigger capture runs on its own, while its session holds
	// the source locked and before the sync writes the target: a DDL in total-order isolation sent
	// then is ordered while the lock is held.
	SyncLocked func()
	// ChunkLocked is copier.Config's: called by each chunk of a keyless table while its session
	// holds the source locked, before the chunk's rows are written.
	ChunkLocked func()
}

// Get is f, or none for a nil f.
func (f *Faults) Get() Faults {
	if f == nil {
		return Faults{}
	}
	return *f
}

// AfterTrigger is carry.Carrier.AfterCreate for CrashAtTrigger (nil when there is none).
func (f *Faults) AfterTrigger() func(n int) error {
	at := f.Get().CrashAtTrigger
	if at == 0 {
		return nil
	}
	return func(n int) error {
		if n == at {
			return ErrCrash
		}
		return nil
	}
}
