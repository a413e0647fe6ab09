package throttle

import (
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

func durations(rs []probeRead) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.took
	}
	return out
}

// The rule's arithmetic, step by step: the target is never under the floor, the bound starts at
// the target's slack once the application is busy, shrinks in proportion to an overshoot as soon
// as two reads pass the target (not at one), ignores the reads a chunk of the old bound may still
// delay, grows back after a window of fast reads until it no longer limits anything, and is
// lifted while the application is idle.
func TestLatencyRuleShortensAndLengthensTheBound(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	usual := 300 * time.Microsecond
	r := newLatencyRule(DefaultLatencyFactor, durations(reads(t0, baselineReads, usual)))
	if r.target != latencyFloor || r.base != usual {
		t.Fatalf("baseline %s, target %s; want %s and the floor %s", r.base, r.target, usual, latencyFloor)
	}
	now := t0.Add(time.Second)
	r.step(now, nil, true)
	slack := latencyFloor - usual
	if r.bound != slack {
		t.Fatalf("busy: bound %s, want the slack %s", r.bound, slack)
	}
	now = now.Add(100 * time.Millisecond)
	r.step(now, append(reads(now, 50, usual), reads(now.Add(50*time.Millisecond), 1, 12*time.Millisecond)...), true)
	if r.bound != slack {
		t.Fatalf("one read over the target: bound %s, want it unchanged (%s)", r.bound, slack)
	}
	now = now.Add(100 * time.Millisecond)
	r.step(now, reads(now, 1, 12*time.Millisecond), true)
	if r.bound != slack/2 || !r.limiting {
		t.Fatalf("two reads of 12 ms over a 4 ms target: bound %s (limiting %v), want half the slack, %s, the shortest: no chunk holds a read longer than the bound",
			r.bound, r.limiting, slack/2)
	}
	cut := r.bound
	// Reads that began before the grace ran out may have met a chunk sized for the old bound.
	r.step(now.Add(10*time.Millisecond), reads(now.Add(time.Millisecond), 5, 12*time.Millisecond), true)
	if r.bound != cut {
		t.Fatalf("reads within the grace after a cut: bound %s, want %s", r.bound, cut)
	}
	now = now.Add(time.Second)
	for i := 0; i < 12 && r.bound < maxLockBound; i++ {
		r.step(now, reads(now, latencyWindow, usual), true)
		now = now.Add(time.Second)
	}
	if r.bound != maxLockBound || r.limiting {
		t.Fatalf("after windows of fast reads: bound %s (limiting %v), want %s, no longer limiting", r.bound, r.limiting, maxLockBound)
	}
	r.step(now, reads(now, 2, 12*time.Millisecond), true)
	if want := time.Duration(float64(slack) / float64(12*time.Millisecond-usual) * float64(maxLockBound)); r.bound != want {
		t.Fatalf("two reads of 12 ms under a bound of %s: bound %s, want %s, shrunk in proportion to the overshoot", maxLockBound, r.bound, want)
	}
	r.step(now, nil, false)
	if r.bound != 0 {
		t.Fatalf("idle: bound %s, want none", r.bound)
	}
}

// Off (--latency-target 0), the rule never bounds a chunk, but still reports the reads' p99.
func TestLatencyRuleOff(t *testing.T) {
	t0 := time.Now()
	r := newLatencyRule(-1, durations(reads(t0, baselineReads, time.Millisecond)))
	for i := 0; i < 5; i++ {
		r.step(t0, reads(t0, latencyWindow, 50*time.Millisecond), true)
	}
	if r.bound != 0 || r.target != 0 || r.p99() != 50*time.Millisecond {
		t.Fatalf("off: bound %s, target %s, p99 %s; want none, none, 50ms", r.bound, r.target, r.p99())
	}
}

// A latency the chunks cannot fix (the bound at its shortest, the reads still slow) makes the
// governor rest longer, down to the pace a busy copy starts at and no further.
func TestGovernorRestsWhenChunksCannotGetShorter(t *testing.T) {
	calm := busy(5000, 300*time.Microsecond, 3)
	calm.reads = reads(time.Now(), 40, 300*time.Microsecond)
	g := newGovernor([]signals{calm, calm, calm}, testIdle, DefaultLatencyFactor)
	g.level = gentleTop
	now := time.Now()
	for i := 0; i < 100; i++ {
		s := busy(5000, 300*time.Microsecond, 3)
		s.at, s.reads = now, append(reads(now, 8, 300*time.Microsecond), reads(now.Add(9*time.Millisecond), 2, 20*time.Millisecond)...)
		g.step(s)
		now = now.Add(100 * time.Millisecond)
	}
	if g.lat.bound != g.lat.shortest() {
		t.Fatalf("reads over the target for 10 s: bound %s, want the shortest, %s", g.lat.bound, g.lat.shortest())
	}
	if g.level != busyStart {
		t.Fatalf("chunks at their shortest and reads still slow: level %d, want %d (rest as long as the lock), no lower", g.level, busyStart)
	}
	if g.why == "" || g.why[:8] != "latency:" {
		t.Fatalf("back-off reason %q, want the latency", g.why)
	}
}
