package throttle

import (
	"strings"
	"testing"
	"time"
)

// reads makes n probe reads of d each, begun one millisecond apart from at.
func reads(at time.Time, n int, d time.Duration) []probeRead {
	out := make([]probeRead, n)
	for i := range out {
		out[i] = probeRead{at: at.Add(time.Duration(i) * time.Millisecond), took: d}
	}
	return out
}

// waits makes n reads of d each, begun 20 ms apart from at, each of which waited for a chunk: a
// lock that ended 100 µs before the read did.
func waits(at time.Time, n int, d time.Duration) ([]probeRead, []lockSpan) {
	var rs []probeRead
	var ls []lockSpan
	for i := 0; i < n; i++ {
		rd := probeRead{at: at.Add(time.Duration(i) * 20 * time.Millisecond), took: d}
		end := rd.at.Add(d - 100*time.Microsecond)
		rs, ls = append(rs, rd), append(ls, lockSpan{from: end.Add(-d - time.Millisecond), to: end})
	}
	return rs, ls
}

func durations(rs []probeRead) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.took
	}
	return out
}

// judge steps the rule with reads and their locks, then once more without reads: a step judges
// the reads of the one before (their chunk may be reported after them).
func judge(r *latencyRule, now time.Time, rs []probeRead, ls []lockSpan) time.Time {
	r.step(now, rs, ls, true)
	now = now.Add(100 * time.Millisecond)
	r.step(now, nil, ls, true)
	return now.Add(100 * time.Millisecond)
}

// The rule's arithmetic, step by step: the target is never under the floor; the bound starts at
// the target's slack once the application is busy; reads slow for another reason than a chunk
// leave it alone; two reads that waited for a chunk past the target (not one) shrink it, in
// proportion to the overshoot, never under half the slack; reads that began while a chunk of the
// old bound may still run are not judged; windows of reads within the target grow it until it no
// longer limits anything; idle lifts it.
func TestLatencyRuleShortensAndLengthensTheBound(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	usual := 300 * time.Microsecond
	r := newLatencyRule(DefaultLatencyFactor, durations(reads(t0, baselineReads, usual)))
	if r.target != latencyFloor || r.base != usual {
		t.Fatalf("baseline %s, target %s; want %s and the floor %s", r.base, r.target, usual, latencyFloor)
	}
	now := t0.Add(time.Second)
	r.step(now, nil, nil, true)
	slack := latencyFloor - usual
	if r.bound != slack {
		t.Fatalf("busy: bound %s, want the slack %s", r.bound, slack)
	}
	now = now.Add(100 * time.Millisecond)
	now = judge(&r, now, reads(now, 20, 12*time.Millisecond), nil)
	if r.bound != slack {
		t.Fatalf("20 reads of 12 ms that met no chunk: bound %s, want it unchanged (%s)", r.bound, slack)
	}
	rs, ls := waits(now, 1, 12*time.Millisecond)
	now = judge(&r, now, append(reads(now, 50, usual), rs...), ls)
	if r.bound != slack {
		t.Fatalf("one read that waited for a chunk past the target: bound %s, want it unchanged (%s)", r.bound, slack)
	}
	rs, ls = waits(now, 1, 12*time.Millisecond)
	now = judge(&r, now, rs, ls)
	if r.bound != slack/2 || !r.limiting {
		t.Fatalf("two reads that waited 12 ms for a chunk, over a 4 ms target: bound %s (limiting %v), want half the slack, %s: no chunk holds a read longer than the bound",
			r.bound, r.limiting, slack/2)
	}
	cut := r.bound
	rs, ls = waits(now.Add(-150*time.Millisecond), 3, 12*time.Millisecond) // began within the grace
	now = judge(&r, now, rs, ls)
	if r.bound != cut {
		t.Fatalf("reads within the grace after a cut: bound %s, want %s", r.bound, cut)
	}
	for i := 0; i < 12 && r.bound < maxLockBound; i++ {
		now = judge(&r, now, reads(now, latencyWindow, usual), nil)
	}
	if r.bound != maxLockBound || r.limiting {
		t.Fatalf("after windows of fast reads: bound %s (limiting %v), want %s, no longer limiting", r.bound, r.limiting, maxLockBound)
	}
	rs, ls = waits(now, 2, 12*time.Millisecond)
	now = judge(&r, now, rs, ls)
	if want := time.Duration(float64(slack) / float64(12*time.Millisecond-usual) * float64(maxLockBound)); r.bound != want {
		t.Fatalf("two reads that waited 12 ms under a bound of %s: bound %s, want %s, shrunk in proportion to the overshoot", maxLockBound, r.bound, want)
	}
	r.step(now, nil, nil, false)
	if r.bound != 0 {
		t.Fatalf("idle: bound %s, want none", r.bound)
	}
}

// Off (--latency-target 0), the rule never bounds a chunk, but still reports the reads' p99.
func TestLatencyRuleOff(t *testing.T) {
	t0 := time.Now()
	r := newLatencyRule(-1, durations(reads(t0, baselineReads, time.Millisecond)))
	for i := 0; i < 5; i++ {
		rs, ls := waits(t0, latencyWindow, 50*time.Millisecond)
		r.step(t0, rs, ls, true)
	}
	if r.bound != 0 || r.target != 0 || r.p99() != 50*time.Millisecond {
		t.Fatalf("off: bound %s, target %s, p99 %s; want none, none, 50ms", r.bound, r.target, r.p99())
	}
}

// Reads that keep waiting for chunks past the target with the chunks at their shortest make the
// governor rest longer, down to the pace a busy copy starts at and no further.
func TestGovernorRestsWhenChunksCannotGetShorter(t *testing.T) {
	calm := busy(5000, 300*time.Microsecond, 3)
	calm.reads = reads(time.Now(), 40, 300*time.Microsecond)
	g := newGovernor([]signals{calm, calm, calm}, testIdle, DefaultLatencyFactor)
	g.level = gentleTop
	now := time.Now()
	var locks []lockSpan // the last second's, as Gentle keeps them
	for i := 0; i < 100; i++ {
		s := busy(5000, 300*time.Microsecond, 3)
		w, ls := waits(now.Add(9*time.Millisecond), 2, 20*time.Millisecond)
		locks = append(locks, ls...)
		s.at, s.reads, s.locks = now, append(reads(now, 8, 300*time.Microsecond), w...), locks[max(len(locks)-20, 0):]
		g.step(s)
		now = now.Add(100 * time.Millisecond)
	}
	if g.lat.bound != g.lat.shortest() {
		t.Fatalf("reads over the target for 10 s: bound %s, want the shortest, %s", g.lat.bound, g.lat.shortest())
	}
	if g.level != busyStart {
		t.Fatalf("chunks at their shortest and reads still slow: level %d, want %d (rest as long as the lock), no lower", g.level, busyStart)
	}
	if !strings.HasPrefix(g.why, "latency:") {
		t.Fatalf("back-off reason %q, want the latency", g.why)
	}
}

// A window judges its own reads: one in which reads waited for chunks close to the target (the
// bound neither shrinks nor grows) is forgotten once judged, so when the chunks stop costing the
// reads anything the next window grows the bound (a window kept since would hold it forever).
func TestLatencyRuleForgetsAJudgedWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	usual := 300 * time.Microsecond
	r := newLatencyRule(DefaultLatencyFactor, durations(reads(t0, baselineReads, usual)))
	now := t0.Add(time.Second)
	r.step(now, nil, nil, true)
	bound, slack := r.bound, r.slack()
	near := usual + slack*9/10 // within the target, past four fifths of the slack: no change
	now = now.Add(100 * time.Millisecond)
	rs, ls := waits(now, latencyWindow, near)
	now = judge(&r, now.Add(latencyWindow*20*time.Millisecond), rs, ls)
	if r.bound != bound {
		t.Fatalf("a window of reads that waited %s for chunks (target %s): bound %s, want it unchanged (%s)", near, r.target, r.bound, bound)
	}
	judge(&r, now, reads(now, latencyWindow, usual), nil)
	if r.bound != 2*bound {
		t.Fatalf("then a window of reads that met no chunk: bound %s, want it doubled to %s", r.bound, 2*bound)
	}
}
