// Package faults holds the tests' hooks into a run: steps slowed, forced down one path, watched or
// crashed on purpose, so that a test reaches an interleaving it could not wait for. Each product
// package that has such points declares them as an interface, its Faults, and reads it from the
// context (copier, cutover, shadow, verify, carry, migration: WithFaults); Hooks.Set implements
// every one of them, and a test package puts it in the context it passes to Run. Only tests import
// this package: the shipped binary holds the interfaces and their no-op defaults, not the hooks.
package faults

import "time"

// Hooks are every hook a test can set; the zero value is none. Each says what it slows, forces,
// watches or crashes, and which tests need it.
type Hooks struct {
	// The copy (package copier, and the runner's pace for it).

	// CopyStage forces the staged path (copier/staged.go) on every server-side chunk (Always) or
	// on none (Never); Auto stages while other clients wait. TestConcurrentWritersDuringCopyAndCutover
	// (staged), the stress test, TestStagedCopyAndItsFallbackWithoutTheGrant.
	CopyStage Force
	// CopyAlwaysParallel keeps the copy's workers in flight even while other clients wait, and
	// OvertakeDelay holds every odd-numbered parallel chunk back this long so that the next one
	// overtakes it: replay then meets chunks written past one not yet begun (copier/progress.go).
	// The parallel cases of the concurrent-writer, trigger-capture, unique-index, resume and stress
	// tests; TestParallelChunkFailureIsReported (CopyAlwaysParallel alone).
	CopyAlwaysParallel bool
	OvertakeDelay      time.Duration
	// ChunkLocked is called by each keyless chunk while its session holds the source locked,
	// before the chunk's rows are written: TestGalera's keyless cases send a DDL in total order
	// then.
	ChunkLocked func()
	// CopyChunkTime replaces the copy's chunk time (Options.ChunkTime stays verification's): many
	// small chunks under the writers, verification at its own pace. IdleChunkTime is the copy's
	// idle chunk time (copier.Pace): equal to the chunk time, it keeps a copy slow. FirstChunk is
	// the copy's first chunk in rows: small, a small table still makes many chunks. The runner's
	// tests under writers, of resumes, of pace and of replicas.
	CopyChunkTime time.Duration
	IdleChunkTime time.Duration
	FirstChunk    int

	// Capture and verification (packages shadow and shadow/verify).

	// ReplayDelay pauses binlog replay before each batch, which keeps it behind the source:
	// TestCutoverWaitsForLaggingReplay, TestUniqueIndexUpFrontUnderWriters,
	// TestMetricsScrapedDuringMigration, TestGalera's rollbacks.
	ReplayDelay time.Duration
	// SyncEvery, when set, is how often trigger capture syncs on its own (200 ms otherwise), and
	// Synced is told how many notes each sync is about to write: TestVerifySyncsABacklogInBatches
	// lets a backlog grow and sees the batches it is synced in.
	SyncEvery time.Duration
	Synced    func(notes int64)
	// SyncLocked is called by each of trigger capture's own syncs while its session holds the
	// source locked, before it writes the target: TestGalera's trigger-capture case sends a DDL
	// in total order then.
	SyncLocked func()
	// VerifyRelease forces verification to let the source go before the target's checksum on
	// every chunk (Always) or on none (Never); Auto is the product's choice. VerifyHold pauses
	// after such an early release, before the target's checksum, where a replay that was not held
	// would move the target on. verify's own tests of each way, the concurrent-writer test and
	// the stress test.
	VerifyRelease Force
	VerifyHold    time.Duration

	// The cut-over (package cutover).

	// OnLocked is called once the tables are locked, before the target catches up (in the gated
	// swap back: once the target caught up, just before the rename is sent); OnRenameQueued, with
	// the lock-holding session's id, once the rename waits behind the lock (in the gated swap
	// back: the gate's session, once the rename waits at the gate). The tests that kill, stall,
	// pause or stop writing at those moments: TestKillingLockHolderMidSwapLeavesOriginal,
	// TestCutoverLockEndsWhenTheServerIsLost, TestTriggerCaptureCutoverHoldsSyncs, the carried
	// triggers' tests, TestGalera's rollbacks and lost servers.
	OnLocked       func()
	OnRenameQueued func(lockConnID int64)
	// GateWait shortens how long the gated swap back waits for its rename to reach the gate
	// (30 s), and with it the gate session's idle limit: TestGalera's rollback that loses the
	// server at the gate.
	GateWait time.Duration

	// The runner (package migration, and the carry of the triggers below it).

	// Simulated crashes (ErrSimulatedCrash): once CrashAfterRows rows are copied (after saving
	// progress as the periodic save would have), on entering the stage named CrashAtStage, or in
	// the carry of the triggers right after creating real trigger CrashAtTrigger (from 1). The
	// tests of resumes after a crash, apply's and rollback's.
	CrashAfterRows int64
	CrashAtStage   string
	CrashAtTrigger int
	// SaveEvery is how often the runner saves its progress (2 s otherwise): the resume tests crash
	// soon after a save.
	SaveEvery time.Duration
	// AllIndexesUpFront creates the shadow with every index, as on a Galera node, on any server:
	// TestUniqueIndexUpFrontUnderWriters and TestUniqueIndexUpFrontResumed run the copy and replay
	// against unique secondary indexes.
	AllIndexesUpFront bool
}

// Force overrides a choice the product makes for itself, so that a test takes each path.
type Force int

const (
	// Auto leaves the choice to the product: the only value outside tests.
	Auto Force = iota
	Always
	Never
)

// Set is h as every product package's Faults interface.
func (h Hooks) Set() Set { return Set{h} }

// Set implements the product packages' Faults with Hooks' values.
type Set struct{ h Hooks }

func (s Set) CopyStage() int                         { return int(s.h.CopyStage) }
func (s Set) CopyAlwaysParallel() bool               { return s.h.CopyAlwaysParallel }
func (s Set) OvertakeDelay() time.Duration           { return s.h.OvertakeDelay }
func (s Set) ChunkLocked() func()                    { return s.h.ChunkLocked }
func (s Set) CopyChunkTime() time.Duration           { return s.h.CopyChunkTime }
func (s Set) IdleChunkTime() time.Duration           { return s.h.IdleChunkTime }
func (s Set) FirstChunk() int                        { return s.h.FirstChunk }
func (s Set) ReplayDelay() time.Duration             { return s.h.ReplayDelay }
func (s Set) SyncEvery() time.Duration               { return s.h.SyncEvery }
func (s Set) Synced() func(notes int64)              { return s.h.Synced }
func (s Set) SyncLocked() func()                     { return s.h.SyncLocked }
func (s Set) VerifyRelease() int                     { return int(s.h.VerifyRelease) }
func (s Set) VerifyHold() time.Duration              { return s.h.VerifyHold }
func (s Set) OnLocked() func()                       { return s.h.OnLocked }
func (s Set) OnRenameQueued() func(lockConnID int64) { return s.h.OnRenameQueued }
func (s Set) GateWait() time.Duration                { return s.h.GateWait }
func (s Set) CrashAfterRows() int64                  { return s.h.CrashAfterRows }
func (s Set) CrashAtStage() string                   { return s.h.CrashAtStage }
func (s Set) CrashAtTrigger() int                    { return s.h.CrashAtTrigger }
func (s Set) SaveEvery() time.Duration               { return s.h.SaveEvery }
func (s Set) AllIndexesUpFront() bool                { return s.h.AllIndexesUpFront }
