// Package copier copies a MyISAM table's rows into its target in key order, in chunks sized so
// that each one holds the source's table lock only briefly (see Chunker).
package copier

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Order is how the copy takes part in the rule that keeps it from undoing captured changes (it is
// defined and enforced by package shadow): BeginChunk is called before a chunk is read, and the
// returned end once the chunk is written.
type Order interface {
	BeginChunk() (end func())
}

// Waiter may hold back the next chunk (throttling while the server or its replicas are busy).
type Waiter interface {
	Wait(ctx context.Context) error
}

// Config tunes the copy.
type Config struct {
	Pace Pace
	// Mode: Replace when captured changes are replayed after the copy's writes (binlog), so the
	// copy's row may overwrite an older one; InsertIgnore when they are written at once into the
	// target (triggers), so what is there is newer than the copy's row.
	Mode table.WriteMode
	// ClientSide reads rows into enginemig and writes them back instead of one REPLACE ... SELECT
	// per chunk: the source lock is then held only for the read, at a much higher total cost.
	ClientSide bool
	// Workers is how many chunks may be copied at once while nobody waits for the table
	// (parallel.go); 0 or 1 copies one at a time.
	Workers int
	// WriteApart: a keyless table's chunks are written after their session lets the source go,
	// not under its lock (a Galera node: keyless.go).
	WriteApart bool
	Logger     *slog.Logger // may be nil
}

// Copier copies one table.
type Copier struct {
	reader, writer *sql.DB
	q              *table.SQL
	cfg            Config
	chunks         *Chunker
	order          Order
	mark           Marker // keyless tables only (keyless.go)
	wait           Waiter

	lockerOnce sync.Once // keyless chunks' locks (keyless.go)
	lockerVal  *mdl.Locker
	lockerErr  error

	copied   atomic.Int64
	lockTime atomic.Int64 // total nanoseconds spent holding the source
	staged   atomic.Int64 // chunks copied through the stage

	stage   *sql.Conn // the session holding the stage table (staged.go); nil before the first
	noStage bool      // the stage could not be created: copy directly

	mu         sync.Mutex    // guards what follows (progress.go)
	handedOut  int           // chunks numbered so far
	furthest   int           // the highest-numbered chunk that began
	frontier   []any         // the end of chunk furthest (Ahead); resumeAfter before any
	lastBegan  bool          // the chunk that reads to the end of the table began
	contiguous int           // chunks 1..contiguous are all written
	finishedAt map[int][]any // ends of chunks written past chunk contiguous+1, by number
	watermark  []any         // the end of chunk contiguous (resume); resumeAfter before any
}

// New prepares a copy along q that starts after the key resumeAfter (nil: at the start). reader
// must use the binary protocol (dbconn.OpenRowReader), writer a binary-charset session
// (OpenRowWriter). wait may be nil. The watermark is set here, not in Run, because capture runs
// before the copy starts and asks Ahead from the first change on.
func New(reader, writer *sql.DB, q *table.SQL, order Order, wait Waiter, cfg Config, resumeAfter []any) *Copier {
	if q.Keyless() {
		cfg = keylessConfig(cfg)
	}
	mark, _ := order.(Marker)
	return &Copier{reader: reader, writer: writer, q: q, cfg: cfg, chunks: NewChunker(writer, q, cfg.Pace), order: order, mark: mark, wait: wait,
		watermark: resumeAfter, frontier: resumeAfter}
}

// Run copies to the end of the table.
func (c *Copier) Run(ctx context.Context) error {
	lo := c.Watermark()
	if c.cfg.ClientSide {
		return c.runClientSide(ctx, lo)
	}
	return c.runServerSide(ctx, lo)
}

// Server-side chunks: one REPLACE ... SELECT per chunk, bounded by a key range found first with an
// index-only query. No row data crosses the network and the server skips parsing and formatting
// every value, which makes the whole copy several times faster than reading rows into the client
// and writing them back (docs/how-it-works/copy.md, "Chunks that hold the source briefly"; no
// figure for it in docs/bench/). The source read lock is held while the chunk is written, so
// chunks are sized by the statement's duration.
//
// The walk (walk.go) plans the next chunk as soon as the source is let go: during a staged chunk's
// drain, or during the rest, and outside the chunk's Order (docs/bench/constants.md, "Behind the design
// pages' choices", has what that saves). While nobody waits for the table, chunks may run beside
// each other (parallel.go); the next one is then planned while they run.
func (c *Copier) runServerSide(ctx context.Context, lo []any) error {
	defer c.closeStage()
	par := newWorkers(ctx, c.cfg.Workers)
	var visitErr error
	err := c.chunks.Walk(ctx, lo, func(ctx context.Context, s Step, release func(took, held time.Duration)) (time.Time, error) {
		visitErr = c.serverSideStep(ctx, par, s, release)
		return time.Time{}, visitErr
	})
	if werr := par.wait(); werr != nil {
		return werr // a chunk failed: err is then only the canceled context's echo
	}
	if err != nil && err != visitErr {
		return fmt.Errorf("copy: %w", err) // planning a step or resting failed
	}
	return err
}

// serverSideStep copies s beside the chunks in flight, or alone once they are written.
func (c *Copier) serverSideStep(ctx context.Context, par *workers, s Step, release func(took, held time.Duration)) error {
	if err := par.context().Err(); err != nil {
		return err // a chunk in flight failed: par.wait has its error
	}
	if err := c.throttle(par.context()); err != nil {
		return err
	}
	if c.alongside(ctx, s) {
		seq := c.handOut()
		par.run(func(ctx context.Context) error { return c.copyAlongside(ctx, s, seq) })
		release(0, 0)
		return nil
	}
	// One chunk at a time from here, after those in flight.
	if err := par.wait(); err != nil {
		return err
	}
	return c.copyAlone(ctx, s, release)
}

// copyAlone copies s's chunk while no other chunk is in flight: staged while other clients wait for
// the table. It releases the walk once the source is let go. A staged chunk's drain into the
// target, written after that, does not count as rest (the walk counts it from the return): it takes
// the CPU and I/O the application needs (measured both ways: docs/bench/constants.md, "Behind the design
// pages' choices").
func (c *Copier) copyAlone(ctx context.Context, s Step, release func(took, held time.Duration)) error {
	seq := c.handOut()
	end := c.order.BeginChunk()
	defer end()
	c.began(seq, s.Hi)
	ch, err := c.copyChunk(ctx, s.Range, s.Contended, func(held time.Duration) { release(held, held) })
	if err != nil {
		return fmt.Errorf("copy: chunk after %v: %w", s.Lo, err)
	}
	c.lockTime.Add(int64(ch.held))
	n := int64(s.Size)
	if s.Last() || ch.staged {
		n = ch.rows
	}
	c.finished(seq, s.Hi, n)
	return nil
}

// chunkCopy is what copying one chunk took.
type chunkCopy struct {
	held   time.Duration // the source was locked
	rows   int64         // rows affected by the statement that read the source
	staged bool
}

// copyChunk copies r: staged while other clients wait for the table (see copyStaged), in one
// REPLACE ... SELECT otherwise. It calls released once the source is let go, with the time it was
// held, unless reading it failed.
func (c *Copier) copyChunk(ctx context.Context, r table.Range, contended bool, released func(held time.Duration)) (chunkCopy, error) {
	if c.q.Keyless() && c.mark != nil && c.mark.Marking() {
		if c.cfg.WriteApart {
			return c.copyMarkedApart(ctx, r, released)
		}
		ch, err := c.copyMarked(ctx, r)
		if err == nil {
			released(ch.held)
		}
		return ch, err
	}
	if c.staging(ctx, contended) {
		if ch, ok, err := c.copyStaged(ctx, r, released); ok || err != nil {
			return ch, err
		}
	}
	ch, err := c.copyDirect(ctx, r)
	if err == nil {
		released(ch.held)
	}
	return ch, err
}

// copyDirect copies r in one REPLACE ... SELECT (or INSERT IGNORE), which holds the source for
// its whole run.
func (c *Copier) copyDirect(ctx context.Context, r table.Range) (chunkCopy, error) {
	query, args := c.q.CopyRange(r, c.cfg.Mode)
	start := time.Now()
	var res sql.Result
	err := dbconn.RetryClusterAborts(ctx, func() (err error) { // one statement, re-read and rewritten whole
		res, err = c.writer.ExecContext(ctx, query, args...)
		return err
	})
	ch := chunkCopy{held: time.Since(start)}
	if err == nil {
		ch.rows, _ = res.RowsAffected() // REPLACE counts a replaced row twice; fine for progress
	}
	return ch, err
}

func (c *Copier) throttle(ctx context.Context) error {
	if c.wait == nil {
		return nil
	}
	return c.wait.Wait(ctx)
}

// SetChunkTime changes the lock-time target while the copy runs (live control).
func (c *Copier) SetChunkTime(d time.Duration) { c.chunks.SetChunkTime(d) }

// Staged is the number of chunks copied through the stage so far.
func (c *Copier) Staged() int64 { return c.staged.Load() }

// Copied is the number of rows written so far.
func (c *Copier) Copied() int64 { return c.copied.Load() }

// ChunkSize is the current chunk size in rows.
func (c *Copier) ChunkSize() int64 { return c.chunks.Size() }

// ChunkSizedFor is the lock-time target the current chunk size was computed for (0: none yet).
func (c *Copier) ChunkSizedFor() time.Duration { return c.chunks.SizedFor() }

// Walk is what the copy's walk has cost so far (the ETA's model of verification: ../migration).
func (c *Copier) Walk() WalkStats { return c.chunks.Stats() }

// LockTime is the total time spent holding the source (the time writers may have waited on us).
func (c *Copier) LockTime() time.Duration { return time.Duration(c.lockTime.Load()) }

// Watermark is the key up to which every row is written (nil before the first chunk), for resume.
func (c *Copier) Watermark() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watermark
}

// AllWritten reports a copy whose last chunk has begun, with one chunk at a time (a keyless
// table's): asked under the exclusive Order, no chunk is in flight, so every chunk is written.
func (c *Copier) AllWritten() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastBegan
}

// Ahead reports whether the copy is certain to read key later, after any change made to it now
// (progress.go).
// Only single integer keys are compared, because Go cannot reproduce string collations: other keys
// are never ahead. Callers hold the Order exclusively, so no chunk is between read and write.
func (c *Copier) Ahead(key []any) bool {
	if !c.q.IntKey() || len(key) != 1 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastBegan {
		return false
	}
	if c.frontier == nil {
		return true
	}
	cmp, ok := table.CompareInts(key[0], c.frontier[0])
	return ok && cmp > 0
}
