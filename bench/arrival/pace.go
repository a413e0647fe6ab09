// Package pace runs a benchmark's application load the way users arrive: each client thread has
// a fixed grid of start slots, and a slot that has already passed when the client is free again is
// lost, never made up by a burst afterwards. A stall therefore shows as lost throughput in the
// seconds it lasted, which is what the application's users lose; a load that catches up on its
// backlog measures how much work eventually got done instead.
package arrival

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/enginemig/enginemig/pace/throttle"
)

// Slots is one client thread's grid: slot k starts at start + k*interval.
type Slots struct {
	start    time.Time
	interval time.Duration
	next     int64 // the next slot not yet handed out
	missed   int64
}

// NewSlots starts a grid at start with one slot every interval (> 0).
func NewSlots(start time.Time, interval time.Duration) *Slots {
	return &Slots{start: start, interval: max(interval, time.Nanosecond)}
}

// Next returns the start of the next slot that has not passed at now, skipping (and counting as
// missed) every slot that began before now since the last one handed out.
func (s *Slots) Next(now time.Time) time.Time {
	slot := s.start.Add(time.Duration(s.next) * s.interval)
	if slot.Before(now) {
		// The first slot at or after now: the ones between were missed.
		due := int64((now.Sub(s.start) + s.interval - 1) / s.interval)
		s.missed += due - s.next
		s.next = due
		slot = s.start.Add(time.Duration(s.next) * s.interval)
	}
	s.next++
	return slot
}

// Missed is how many slots were skipped so far.
func (s *Slots) Missed() int64 { return s.missed }

// Wait sleeps until the next slot (Next at the current time) or until ctx ends.
func (s *Slots) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return throttle.Sleep(ctx, time.Until(s.Next(time.Now())))
}

// Seconds counts completions per whole second (or per Width) since its start, as the client sees
// them. Safe for concurrent use.
type Seconds struct {
	start  time.Time
	width  time.Duration
	mu     sync.Mutex
	counts []int64
}

// NewSeconds counts per second from start.
func NewSeconds(start time.Time) *Seconds { return NewCounter(start, time.Second) }

// NewCounter counts per width (> 0) from start: a finer count lets a caller cut seconds at a
// stage's boundaries.
func NewCounter(start time.Time, width time.Duration) *Seconds {
	return &Seconds{start: start, width: max(width, time.Millisecond)}
}

// Width is the span of one count.
func (c *Seconds) Width() time.Duration { return c.width }

// Add counts one completion at t; completions before the start are ignored.
func (c *Seconds) Add(t time.Time) {
	if t.Before(c.start) {
		return
	}
	i := int(t.Sub(c.start) / c.width)
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.counts) <= i {
		c.counts = append(c.counts, 0)
	}
	c.counts[i]++
}

// Start is when count 0 began.
func (c *Seconds) Start() time.Time { return c.start }

// Counts returns the completions of each second (width) so far (index 0: the first).
func (c *Seconds) Counts() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.counts...)
}

// Share is the throughput of whole seconds as a share of a target rate per second.
type Share struct {
	Seconds int     // whole seconds counted
	Mean    float64 // mean throughput over them / target
	Worst   float64 // the worst second's / target
	WorstAt int     // index of the worst second
}

// Over summarises counts[from:to] (seconds; clamped to what was counted) against target per second.
func Over(counts []int64, from, to int, target float64) Share {
	from, to = max(from, 0), min(to, len(counts))
	if to <= from || target <= 0 {
		return Share{}
	}
	var sum int64
	sh := Share{Seconds: to - from, Worst: -1}
	for i := from; i < to; i++ {
		sum += counts[i]
		if r := float64(counts[i]) / target; sh.Worst < 0 || r < sh.Worst {
			sh.Worst, sh.WorstAt = r, i
		}
	}
	sh.Mean = float64(sum) / float64(to-from) / target
	return sh
}

// Percentile returns the p-th percentile (0..100) of ds, which it sorts; 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}
