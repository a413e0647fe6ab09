package copier_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// boundRoom is a Room whose lock bound the test sets; it never rests, one chunk at a time.
type boundRoom struct{ bound atomic.Int64 }

func (r *boundRoom) RestRatio() float64           { return 0 }
func (r *boundRoom) Workers(int) int              { return 1 }
func (r *boundRoom) LockBound() time.Duration     { return time.Duration(r.bound.Load()) }
func (r *boundRoom) set(d time.Duration)          { r.bound.Store(int64(d)) }
func (l *boundLog) chunk(i int) time.Duration     { return l.held[i+1] - l.held[i] }
func (l *boundLog) chunks() int                   { return len(l.held) - 1 }
func (l *boundLog) median(a, b int) time.Duration { return medianOf(l, a, b) }

// boundLog is an Order that records how long the copy had held the source as each chunk begins
// (between two chunks, the difference is what the first held it), and calls phase with the
// chunk's number first.
type boundLog struct {
	c     *copier.Copier
	phase func(n int)
	mu    sync.Mutex
	held  []time.Duration
}

func (l *boundLog) BeginChunk() func() {
	l.mu.Lock()
	n := len(l.held)
	l.held = append(l.held, l.c.LockTime())
	l.mu.Unlock()
	l.phase(n)
	return func() {}
}

func medianOf(l *boundLog, a, b int) time.Duration {
	var ds []time.Duration
	for i := a; i < b; i++ {
		ds = append(ds, l.chunk(i))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// The copy keeps each chunk's lock within the Room's bound (the latency target's lever): while
// nobody waits for the table its chunks grow toward 250 ms; once the bound is set the very next
// chunk planned is cut to it at once (not halved chunk by chunk), the chunks then hold the source
// about as long as the bound says; lifted, they grow again. Judged against the same copy's
// chunks before the bound.
func TestChunksKeepToTheRoomsLockBound(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	const rows = 250000
	sandboxtest.MustExec(t, sdb,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, s CHAR(40) NOT NULL) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq % 977, HEX(seq * 2654435761) FROM "+sandboxtest.Seq(rows),
		"CREATE TABLE _t_new (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, s CHAR(40) NOT NULL) ENGINE=InnoDB")
	p := openPools(t)
	q := tablePair(t, p.control, schema, "t", "_t_new")
	// 5 ms: a chunk's fixed cost (its lock's round trips) is about 2 ms on a busy 2-core machine,
	// so a 2 ms bound measured that cost more than the chunk's size.
	const bound = 5 * time.Millisecond
	const set, lifted = 6, 20 // the chunk numbers at whose beginning the bound is set and lifted
	room := &boundRoom{}
	log := &boundLog{phase: func(n int) {
		switch n {
		case set:
			room.set(bound)
		case lifted:
			room.set(0)
		}
	}}
	c := copier.New(p.reader, p.writer, q, log, nil, copier.Config{Pace: copier.Pace{Room: room}}, nil)
	log.c = c
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.Copied() != rows {
		t.Fatalf("copied %d rows, want %d", c.Copied(), rows)
	}
	if log.chunks() < set+4 {
		t.Fatalf("only %d chunks: after the bound of %s was set at chunk %d the chunks stayed long enough to finish the table (the one after it held the source %s)",
			log.chunks(), bound, set, log.chunk(min(set+1, log.chunks()-1)))
	}
	// Chunk `set` was planned before the bound: the first chunk planned under it is the next.
	before, first := log.chunk(set), log.chunk(set+1)
	under := log.median(set+2, min(lifted, log.chunks()-1))
	var after time.Duration
	for i := lifted + 1; i < log.chunks()-1; i++ { // the last chunk holds what is left
		after = max(after, log.chunk(i))
	}
	t.Logf("%d chunks; the last before the bound held the source %s, the first under it %s, the median under it %s (bound %s), the longest after it %s",
		log.chunks(), before, first, under, bound, after)
	if first > before/4 {
		t.Errorf("the first chunk under the bound held the source %s, after one of %s: want it cut to the bound at once (%s), not halved", first, before, bound)
	}
	if under > 2*bound {
		t.Errorf("under a bound of %s the chunks held the source %s (median), want at most twice the bound", bound, under)
	}
	if log.chunks() < lifted+3 {
		t.Fatalf("%d chunks: the table ran out before the bound was lifted at chunk %d", log.chunks(), lifted)
	}
	if after < 4*under {
		t.Errorf("after the bound was lifted the longest chunk held the source %s, want it to grow again past four times the %s under the bound", after, under)
	}
}
