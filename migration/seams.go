package migration

import (
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/shadow"
)

// seams are a run's test seams: simulated crashes and deliberately slowed or forced steps. Only
// this package's tests set them (Options.seams is unexported); the zero value is none.
type seams struct {
	shadow.Seams
	// Simulated crashes (errSimulatedCrash): once this many rows are copied (after saving
	// progress as the periodic save would have), on entering the stage named, or in the trigger
	// step right after creating real trigger n (from 1).
	CrashAfterRows int64
	CrashAtStage   string
	CrashAtTrigger int
	// SaveEvery is how often progress is saved (the runner's default when 0).
	SaveEvery time.Duration
	// CopyChunkTime, when set, is the copy's copier.Pace.ChunkTime alone (Options.ChunkTime is the
	// copy's and verification's): short chunks in the copy, verification at its own pace.
	CopyChunkTime time.Duration
	// IdleChunkTime is copier.Pace.IdleChunkTime: equal to the chunk time, it keeps a copy slow.
	IdleChunkTime time.Duration
	// FirstChunk is copier.Pace.FirstChunk, the copy's first chunk size in rows: small, a small
	// table is copied in many chunks from the start.
	FirstChunk int
	// Stage, AlwaysParallel and OvertakeDelay are copier.Config's: which chunks are staged,
	// parallel chunks even while clients wait, and odd chunks held back so even ones overtake.
	Stage          copier.StagePolicy
	AlwaysParallel bool
	OvertakeDelay  time.Duration
	// AllIndexesUpFront creates the shadow with every index, as on a Galera node, on any server:
	// the copy and replay then run against unique secondary indexes (shadow/order.go, "unique
	// secondary indexes").
	AllIndexesUpFront bool
	// ChunkLocked is copier.Config's: called by each chunk of a keyless table while its session
	// holds the source locked, before the chunk's rows are written.
	ChunkLocked func()
}

// AfterTrigger is carry.Carrier.AfterCreate for CrashAtTrigger (nil when there is none).
func (s seams) AfterTrigger() func(n int) error { return shadow.CrashAtTrigger(s.CrashAtTrigger) }
