package copier

import (
	"context"
	"time"
)

// DefaultRestRatio: after a chunk that other clients waited for, the copy pauses this many times
// the chunk's duration, so the application gets the table (and the CPU) back for a while. 1.0
// keeps the copy to about half of the time under contention.
const DefaultRestRatio = 1.0

// rest pauses after a contended chunk; see DefaultRestRatio.
func (c *Copier) rest(ctx context.Context, took time.Duration) error {
	if !c.contended || c.cfg.RestRatio <= 0 {
		return nil
	}
	select {
	case <-time.After(time.Duration(float64(took) * c.cfg.RestRatio)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DefaultIdleChunkTime is the longest a chunk may hold the source lock while nobody waits for it.
// With no waiting client, a long chunk costs nothing and saves per-statement overhead (each chunk
// is a commit); as soon as a client waits, chunks drop back to ChunkTime.
const DefaultIdleChunkTime = 250 * time.Millisecond

// chunkTarget picks this chunk's lock-time target: ChunkTime under contention, otherwise up to
// twice the previous target, capped at IdleChunkTime.
func (c *Copier) chunkTarget(ctx context.Context) time.Duration {
	base := time.Duration(c.chunkTime.Load())
	if c.cfg.IdleChunkTime <= base {
		return base
	}
	if c.waits.Contended(ctx) {
		c.target = base
		c.contended = true
	} else {
		c.contended = false
		c.target = min(max(c.target, base)*2, c.cfg.IdleChunkTime)
	}
	return c.target
}
