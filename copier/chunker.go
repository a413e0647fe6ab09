package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/throttle"
)

// Chunk sizing, shared by the copy and by verification (its second pass over the same key).
//
// A MyISAM statement holds the table's lock for its whole run and every writer queues behind it,
// so the time one chunk holds the source is what the application feels. 10–20 ms is short
// against typical web-request budgets yet long enough to amortise the per-statement overhead
// (per-statement costs dominate below a few thousand rows).
const (
	// DefaultChunkTime is the lock-time target of one chunk while other clients wait for the table.
	DefaultChunkTime = 15 * time.Millisecond
	// DefaultIdleChunkTime is the target while nobody waits: a long chunk then costs no one
	// anything and saves per-chunk overhead (each chunk is a statement and a commit); as soon as
	// a client waits, chunks drop back to ChunkTime.
	DefaultIdleChunkTime = 250 * time.Millisecond
	// DefaultRestRatio: after a chunk that other clients waited for, pause this many times the
	// chunk's duration, so the application gets the table (and the CPU) back. 1.0 keeps the copy
	// to about half of the time under contention.
	DefaultRestRatio = 1.0

	// FirstChunkRows is the first chunk's rows: a table of no more rows is copied in one chunk.
	FirstChunkRows = 1000

	initialChunk = FirstChunkRows
	minChunk     = 50
	maxChunk     = 200000
)

// Pace tunes chunk sizes; zero values take the defaults above.
type Pace struct {
	ChunkTime     time.Duration
	IdleChunkTime time.Duration // set equal to ChunkTime to keep chunks short regardless
	RestRatio     float64       // negative: never rest
	// FirstChunk is the size in rows of the first chunk (default 1000): verification starts where
	// the copy ended instead of growing again from 1000 rows, 7 chunks to reach 100k.
	FirstChunk int
	// FirstTarget is the lock-time target FirstChunk was sized for (0: unknown, then the longest
	// of ChunkTime and IdleChunkTime): a lower target shrinks the first chunk (fit).
	FirstTarget time.Duration
	// MaxChunk caps the chunk size in rows (default 200000). Verification raises it: a MyISAM
	// checksum of a large range costs a full scan plus a little a row, so on an idle server few
	// large chunks beat many capped ones (docs/bench/constants.md, "Measurements behind the code's constants").
	MaxChunk int
	// Room, when set, decides the rests and the workers by the application's own signals
	// (throttle.Gentle) instead of RestRatio and the lock waits seen before a chunk.
	Room Room
}

// Room is how much of the server the application leaves the copy and verification.
type Room interface {
	// RestRatio is the pause after a chunk, in multiples of the time it held the source.
	RestRatio() float64
	// Workers is how many chunks may be in flight, at most limit.
	Workers(limit int) int
	// LockBound is the longest a chunk may hold the source now (0: no bound): what the
	// application's latency target leaves (throttle.Gentle). It caps every target below.
	LockBound() time.Duration
}

// LockReporter is a Room told of each time a chunk held the source (throttle.Gentle: its latency
// target tells a read that waited for a chunk from one slow for another reason).
type LockReporter interface {
	Held(from, to time.Time)
}

func (p Pace) withDefaults() Pace {
	if p.ChunkTime <= 0 {
		p.ChunkTime = DefaultChunkTime
	}
	if p.IdleChunkTime == 0 {
		p.IdleChunkTime = DefaultIdleChunkTime
	}
	if p.RestRatio == 0 {
		p.RestRatio = DefaultRestRatio
	}
	if p.FirstChunk <= 0 {
		p.FirstChunk = initialChunk
	}
	if p.MaxChunk <= 0 {
		p.MaxChunk = maxChunk
	}
	return p
}

// Chunker sizes the ranges of a table's copy key by the time each range takes. Its steps are
// taken in one order, by Walk (walk.go): the target (target), the range (next), what the work
// took (took), and the rest it owes (restFor).
type Chunker struct {
	db         *sql.DB // interpolating parameters (see next)
	q          *table.SQL
	pace       Pace
	contention *throttle.Contention

	chunkTime atomic.Int64 // current Pace.ChunkTime, changeable while running
	size      atomic.Int64
	sizedFor  atomic.Int64 // the target the size was last computed for (took, fit)

	mu        sync.Mutex
	contended bool
	stats     WalkStats // under mu
}

// WalkStats is what a walk has cost so far, step by step: the steps visited, their rows (each
// step's size when planned), how long they held the source, the rests they owed, and the walk's
// own time from its first step (visits, rests and planning, one step after another).
type WalkStats struct {
	Steps int64
	Rows  int64
	Held  time.Duration
	Rest  time.Duration
	Time  time.Duration
}

// Stats returns what the walks so far cost.
func (c *Chunker) Stats() WalkStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// count adds a released step to the stats.
func (c *Chunker) count(s Step, held, rest time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Steps++
	c.stats.Rows += int64(s.Size)
	c.stats.Held += held
	c.stats.Rest += rest
}

// walked adds d to the walks' time.
func (c *Chunker) walked(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Time += d
}

// NewChunker sizes ranges of q's source. db must interpolate parameters (dbconn.OpenRowWriter):
// see next.
func NewChunker(db *sql.DB, q *table.SQL, pace Pace) *Chunker {
	given := pace.FirstChunk > 0
	pace = pace.withDefaults()
	c := &Chunker{db: db, q: q, pace: pace, contention: throttle.NewContention(db)}
	c.chunkTime.Store(int64(pace.ChunkTime))
	c.size.Store(int64(min(max(pace.FirstChunk, minChunk), pace.MaxChunk)))
	if given {
		c.sizedFor.Store(int64(pace.FirstTarget))
		if pace.FirstTarget <= 0 {
			c.sizedFor.Store(int64(max(pace.ChunkTime, pace.IdleChunkTime)))
		}
	}
	return c
}

// next returns the end of the range that starts after lo (nil: at the start of the table) and
// holds the chunk size in rows, and the size; hi is nil when fewer rows remain (the range is open).
// The bound is read by index only. It is sent as text with the values interpolated, not as a
// prepared statement: MariaDB 10.11 runs the prepared form as an index-condition scan that reads
// every row, and the literal form index-only, about ten times cheaper a row
// (docs/bench/constants.md, "Measurements behind the code's constants").
func (c *Chunker) next(ctx context.Context, lo []any) (hi []any, size int, err error) {
	size = int(c.size.Load())
	if !c.q.Chunked() {
		return nil, size, nil // no key to walk: one range, the whole table
	}
	query, args := c.q.Bound(lo)
	vals, err := dbconn.ScanValues(c.db.QueryRowContext(ctx, query, append(args, size-1)...), len(c.q.KeyPositions()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, size, nil
	} else if err != nil {
		return nil, 0, fmt.Errorf("chunk bound after %v: %w", lo, err)
	}
	// Integer keys travel as integers: compared as text with an integer column they would be
	// compared as doubles, inexact above 2^53.
	for i, v := range vals {
		if b, ok := v.([]byte); ok && c.q.IntKeyCol[i] {
			if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
				vals[i] = n
			} else if u, err := strconv.ParseUint(string(b), 10, 64); err == nil {
				vals[i] = u
			}
		}
	}
	return vals, size, nil
}

// target picks the next chunk's lock-time target: ChunkTime while other clients wait for the
// table (contended), IdleChunkTime otherwise, and never over the Room's LockBound. The size still
// grows at most twofold a chunk (took), so a chunk after contention ends is no longer than twice
// the last contended one; a lower target shrinks it at once (fit). Contention is checked whatever
// the targets: it also decides the rest and the staging of the chunk.
func (c *Chunker) target(ctx context.Context) (target time.Duration, contended bool) {
	target = time.Duration(c.chunkTime.Load())
	c.mu.Lock()
	c.contended = c.contention.Contended(ctx)
	contended = c.contended
	c.mu.Unlock()
	if !contended && c.pace.IdleChunkTime > target {
		target = c.pace.IdleChunkTime
	}
	if b := c.lockBound(); b > 0 {
		target = min(target, b)
	}
	c.fit(target)
	return target, contended
}

// lockBound is the Room's bound on a chunk's lock, 0 for none.
func (c *Chunker) lockBound() time.Duration {
	if c.pace.Room == nil {
		return 0
	}
	return c.pace.Room.LockBound()
}

// fit shrinks the size at once in proportion when the target falls below the one it was sized
// for: a chunk sized for 250 ms must not hold the source that long once the target is 3 ms.
func (c *Chunker) fit(target time.Duration) {
	was := time.Duration(c.sizedFor.Load())
	if was <= target || was <= 0 {
		return
	}
	size := c.size.Load()
	c.size.Store(max(int64(float64(size)*float64(target)/float64(was)), minChunk))
	c.sizedFor.Store(int64(target))
}

// held reports a lock of the source that ended now and lasted d, when the Room wants to know.
func (c *Chunker) held(d time.Duration) {
	if r, ok := c.pace.Room.(LockReporter); ok && d > 0 {
		now := time.Now()
		r.Held(now.Add(-d), now)
	}
}

// stale reports a step planned for a longer lock than the Room's bound now allows (the bound
// fell while it waited for its rest): it is planned again.
func (c *Chunker) stale(s Step) bool {
	b := c.lockBound()
	return b > 0 && s.Target > b
}

// took moves the chunk size toward the row count that takes s's target, given that s's work
// took took, at most doubling or halving per step so one slow chunk (a disk hiccup) does not
// swing it wildly. The last step says nothing about speed: it holds any number of rows up to its
// size.
func (c *Chunker) took(s Step, took time.Duration) {
	if s.Last() || took <= 0 {
		return
	}
	size := s.Size
	ideal := int(float64(size) * float64(s.Target) / float64(took))
	// MaxChunk is a hard cap, below minChunk too (a client-side copy's chunks of wide rows, a
	// Galera node's write sets).
	c.size.Store(int64(min(max(min(ideal, size*2), size/2, minChunk), c.pace.MaxChunk)))
	c.sizedFor.Store(int64(s.Target))
}

// restFor is how long to pause after a chunk that held the source for held, so the application
// gets the table back: RestRatio times held, 0 unless the last target saw other clients waiting;
// with a Room, what it says.
func (c *Chunker) restFor(held time.Duration) time.Duration {
	if c.pace.Room != nil {
		// A chunk that waited for the table (writers queued ahead of its read lock) "held" it
		// for the wait too; the rest is for the lock the chunk meant to take, twice its target
		// at most.
		held = min(held, 2*time.Duration(c.chunkTime.Load()))
		return time.Duration(float64(held) * c.pace.Room.RestRatio())
	}
	c.mu.Lock()
	contended := c.contended
	c.mu.Unlock()
	if !contended || c.pace.RestRatio <= 0 {
		return 0
	}
	return time.Duration(float64(held) * c.pace.RestRatio)
}

// SetChunkTime changes the contended lock-time target while running (live control).
func (c *Chunker) SetChunkTime(d time.Duration) {
	if d > 0 {
		c.chunkTime.Store(int64(d))
	}
}

// Size is the current chunk size in rows.
func (c *Chunker) Size() int64 { return c.size.Load() }

// SizedFor is the lock-time target the current size was computed for (0: none yet).
func (c *Chunker) SizedFor() time.Duration { return time.Duration(c.sizedFor.Load()) }
