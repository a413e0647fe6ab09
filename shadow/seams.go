package shadow

import (
	"errors"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/shadow/verify"
)

// Seams are the pipeline's test seams: steps slowed or forced so that a test can reach an
// interleaving on purpose. The zero value (and a nil *Seams) is none; no flag reaches them.
type Seams struct {
	// ReplayDelay pauses before each replayed batch, which keeps replay behind the source.
	ReplayDelay time.Duration
	// SyncLocked is called by each sync trigger capture runs on its own, while its session holds
	// the source locked and before the sync writes the target: a DDL in total-order isolation sent
	// then is ordered while the lock is held.
	SyncLocked func()
	// Synced is told how many notes each sync of trigger capture's is about to write into the
	// target: a test sees the batches a backlog was synced in.
	Synced func(notes int64)
	// SyncEvery, when set, is how often trigger capture syncs on its own (200 ms otherwise): a
	// long one lets a backlog of notes grow.
	SyncEvery time.Duration
	// VerifyRelease and VerifyHold are verify.Config's Release and HoldDelay: which verification
	// chunks let the source go early, and a pause while replay is held.
	VerifyRelease verify.Release
	VerifyHold    time.Duration
}

// get is s, or none for a nil s.
func (s *Seams) get() Seams {
	if s == nil {
		return Seams{}
	}
	return *s
}

// ErrSimulatedCrash is what a test's simulated crash returns (apply's and rollback's seams): the
// run stops where it is, cleaning nothing up, as if the process had died there.
var ErrSimulatedCrash = outcome.New(outcome.NeedsAttention, errors.New("simulated crash (test)"), "")

// CrashAtTrigger is a carry.Carrier.AfterCreate that fails with ErrSimulatedCrash right after real
// trigger n is created (from 1); nil for 0.
func CrashAtTrigger(at int) func(n int) error {
	if at == 0 {
		return nil
	}
	return func(n int) error {
		if n == at {
			return ErrSimulatedCrash
		}
		return nil
	}
}
