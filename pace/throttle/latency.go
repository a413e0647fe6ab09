package throttle

import (
	"fmt"
	"slices"
	"time"
)

// The latency target: the one rule that keeps the application's tail latency during the copy and
// verification near what it was before them. It is enforced here (latencyRule.step); the copy and
// verification only read its bound (Gentle.LockBound) and report their locks (Gentle.Held).
//
// The application's latency is the probe's (a primary-key read of the table, timed every
// GentleConfig.ProbeEvery). Before the copy, while the application is busy, Gentle times it for at
// least a second: the p99 of those reads is the baseline, their median the usual read. The target
// is DefaultLatencyFactor (--latency-target) times the baseline, and never under latencyFloor:
// the probe's own p99 moves by milliseconds between seconds of an unchanged load, and a target
// under that noise would hold every chunk at its shortest for nothing (docs/bench/constants.md,
// "Measurements behind the code's constants").
//
// The lever is the length of a chunk's lock. A read that meets a chunk while a writer is queued
// behind it waits for what is left of the chunk, so the chunk's lock bounds the wait, and the
// read ends when the chunk lets the source go. A read counts as one that waited for a chunk when
// it began before one of the reported locks ended and ended within chunkEcho plus the baseline
// of that end. Only those move the bound: a read slow for another reason (the server's own load,
// another session's lock) says nothing about the chunks, and shortening them for it would only
// slow the copy. The bound starts, once the application is busy, at the target's slack (target
// minus the usual read) and follows what the reads that began after its last change show:
//
//   - as soon as two of them waited for a chunk and took longer than the target (the p99 of any
//     window of latencyWindow reads holding them is over it), it shrinks in proportion to the
//     overshoot, to between an eighth and 0.7 of itself, never under half the slack (nor
//     minLockBound): a read waits at most for what is left of a chunk, so under that it is not
//     the chunks' length that holds reads past the target but queues and the server's load, and
//     shorter chunks would only slow the copy (their own statements cost more than their rows);
//   - after latencyWindow of them with no such two, it grows: twice as long while the p99 of
//     those that waited for a chunk keeps half the slack (none waited: the chunks cost the
//     reads nothing), a quarter longer while it keeps a fifth, otherwise not (a bound near the
//     slack keeps the p99 near the target when most reads meet a chunk); either way the next
//     window judges only its own reads; at maxLockBound it no longer limits anything;
//   - at its shortest and still over the target: the governor drops two levels (longer rests:
//     fewer reads meet a chunk, and the copy takes less of the server), but not below busyStart,
//     the pace a busy application's copy starts at.
//
// While the application is idle the bound is lifted: nobody waits for a chunk.
const (
	DefaultLatencyFactor = 1.5
	latencyFloor         = 4 * time.Millisecond
	latencyWindow        = 100 // reads: one second at the default ProbeEvery
	baselineReads        = 100 // reads before the copy, at least, while the application is busy
	minLockBound         = time.Millisecond
	maxLockBound         = time.Second
	// cutGrace: reads that began this soon after a cut (at most twice the old bound: sizes follow
	// the target only roughly) may still meet a chunk sized for the old bound.
	cutGrace = 300 * time.Millisecond
	// chunkEcho: a read that waited for a chunk ends this soon after the chunk's lock, plus the
	// baseline p99 (the writers queued ahead of it, its own round trip, the wake-ups a busy
	// machine delays).
	chunkEcho = time.Millisecond
)

// lockSpan is one time a chunk of the copy or verification held the source.
type lockSpan struct{ from, to time.Time }

// probeRead is one timed probe.
type probeRead struct {
	at   time.Time // when it began
	took time.Duration
}

// latencyRule holds the target and the bound (the rule above). Not safe for concurrent use.
type latencyRule struct {
	target  time.Duration // 0: the rule is off
	base    time.Duration // the reads' p99 before the copy
	typical time.Duration // their median
	bound   time.Duration // the longest a chunk may hold the source; 0: none
	since   time.Time     // reads that began earlier say nothing about the bound
	window  int           // reads judged since the last change, at most latencyWindow
	met     []time.Duration
	pending []probeRead     // the last step's reads, judged at the next (their chunk may be reported after them)
	recent  []time.Duration // the last latencyWindow reads, whatever the bound: the p99 reported
	// stuck: over the target with the bound at its shortest (the governor rests longer).
	stuck bool
	// limiting: the bound has been cut and not grown back to maxLockBound since.
	limiting bool
}

// newLatencyRule learns the baseline from the reads before the copy; factor <= 0 turns the rule
// off (the reads are still reported).
func newLatencyRule(factor float64, learned []time.Duration) latencyRule {
	r := latencyRule{base: quantile(learned, 99), typical: quantile(learned, 50)}
	for _, d := range learned { // until the copy's own come in
		r.recent = appendWindow(r.recent, d)
	}
	if factor > 0 {
		r.target = max(time.Duration(factor*float64(r.base)), latencyFloor)
	}
	return r
}

// slack is how long a read may wait for a chunk within the target.
func (r *latencyRule) slack() time.Duration { return max(r.target-r.typical, minLockBound) }

// shortest is the shortest bound: half the slack, at least minLockBound.
func (r *latencyRule) shortest() time.Duration { return max(r.slack()/2, minLockBound) }

// lift removes the bound: the application is idle.
func (r *latencyRule) lift(now time.Time) {
	r.bound, r.stuck, r.limiting = 0, false, false
	r.restart(now)
}

// step takes the reads completed since the last one and the chunks' recent locks; busy says the
// application is not idle.
func (r *latencyRule) step(now time.Time, reads []probeRead, locks []lockSpan, busy bool) {
	for _, rd := range reads {
		r.recent = appendWindow(r.recent, rd.took)
	}
	judged := r.pending
	r.pending = append([]probeRead(nil), reads...)
	if r.target == 0 {
		return
	}
	if !busy {
		r.lift(now)
		return
	}
	if r.bound == 0 {
		r.change(now, r.slack())
		return
	}
	for _, rd := range judged {
		if rd.at.Before(r.since) {
			continue
		}
		r.window = min(r.window+1, latencyWindow)
		if r.waitedForChunk(rd, locks) {
			r.met = appendWindow(r.met, rd.took)
		}
	}
	over := 0
	for _, d := range r.met {
		if d > r.target {
			over++
		}
	}
	switch {
	case over >= 2:
		r.limiting = true
		if r.bound <= r.shortest() {
			r.stuck = true
			r.restart(now)
			return
		}
		waited := max(second(r.met)-r.typical, time.Microsecond)
		cut := min(max(float64(r.slack())/float64(waited), 0.125), 0.7)
		r.change(now.Add(min(2*r.bound, cutGrace)), max(time.Duration(cut*float64(r.bound)), r.shortest()))
	case r.window >= latencyWindow:
		r.stuck = false
		p99 := second(r.met) // 0: no read met a chunk
		switch {
		case p99 <= r.typical+r.slack()/2:
			r.change(now, min(2*r.bound, maxLockBound))
		case p99 <= r.typical+r.slack()*4/5:
			r.change(now, min(r.bound*5/4, maxLockBound))
		default: // judged: the next window starts afresh (kept, it would hold the bound forever)
			r.restart(now)
		}
		if r.bound >= maxLockBound {
			r.limiting = false
		}
	}
}

// waitedForChunk reports a read that began before one of the chunks' locks ended and ended when
// it did, give or take the echo (both ends are seen by clients, each woken when it can be): it
// waited for that chunk.
func (r *latencyRule) waitedForChunk(rd probeRead, locks []lockSpan) bool {
	end, echo := rd.at.Add(rd.took), chunkEcho+r.base
	for _, l := range locks {
		if d := end.Sub(l.to); rd.at.Before(l.to) && d >= -echo && d <= echo {
			return true
		}
	}
	return false
}

// change sets the bound and judges it on the reads that begin from since on.
func (r *latencyRule) change(since time.Time, bound time.Duration) {
	r.bound = bound
	r.restart(since)
}

func (r *latencyRule) restart(since time.Time) {
	r.since, r.window, r.met = since, 0, r.met[:0]
}

// why explains a stuck rule for the governor's back-off.
func (r *latencyRule) why() string {
	return fmt.Sprintf("latency: the primary-key read's p99 is %s, over its target of %s, with chunks at their shortest",
		r.p99().Round(10*time.Microsecond), r.target.Round(10*time.Microsecond))
}

// p99 is the p99 of the last latencyWindow reads.
func (r *latencyRule) p99() time.Duration { return quantile(r.recent, 99) }

func appendWindow(w []time.Duration, d time.Duration) []time.Duration {
	if len(w) >= latencyWindow {
		w = append(w[:0], w[1:]...)
	}
	return append(w, d)
}

// second is the second longest of ds (the longest when there is one): the p99 of a window of
// latencyWindow reads.
func second(ds []time.Duration) time.Duration {
	var a, b time.Duration
	for _, d := range ds {
		if d > a {
			a, b = d, a
		} else if d > b {
			b = d
		}
	}
	if len(ds) < 2 {
		return a
	}
	return b
}

// quantile is the q-th percentile (0..100) of ds, nearest rank; 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*q/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
