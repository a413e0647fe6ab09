package arrival

import (
	"testing"
	"time"
)

// client runs one paced client on a virtual clock for d: each iteration takes work, except the one
// starting at stallAt, which takes stall (a lock held by someone else, say).
func client(interval, work, stall time.Duration, stallAt, d time.Duration) (*Seconds, *Slots) {
	start := time.Unix(1000, 0)
	slots, secs := NewSlots(start, interval), NewSeconds(start)
	for now := start; now.Sub(start) < d; {
		at := slots.Next(now)
		took := work
		if at.Sub(start) == stallAt {
			took = stall
		}
		now = at.Add(took)
		secs.Add(now)
	}
	return secs, slots
}

// A client stalled for 600 ms skips the slots it missed: the second of the stall loses them, and
// the next second does not make them up with a burst.
func TestStalledClientSkipsMissedSlots(t *testing.T) {
	secs, slots := client(10*time.Millisecond, 2*time.Millisecond, 600*time.Millisecond, time.Second, 4*time.Second)
	counts := secs.Counts()
	if len(counts) < 4 {
		t.Fatalf("counted %d seconds, want 4: %v", len(counts), counts)
	}
	// Second 1: the stalled iteration (ends at 1.60 s) and the slots from 1.60 s on.
	if counts[0] != 100 || counts[1] != 41 || counts[2] != 100 || counts[3] != 100 {
		t.Errorf("per-second completions %v, want [100 41 100 100]", counts[:4])
	}
	if slots.Missed() != 59 {
		t.Errorf("missed %d slots, want 59 (1.01 s to 1.59 s)", slots.Missed())
	}
	sh := Over(counts, 0, 4, 100)
	if sh.Worst != 0.41 || sh.WorstAt != 1 || sh.Mean != 0.8525 {
		t.Errorf("share %+v, want mean 0.8525, worst 0.41 at second 1", sh)
	}
	// The same client without the stall keeps its rate.
	calm, _ := client(10*time.Millisecond, 2*time.Millisecond, 2*time.Millisecond, time.Second, 4*time.Second)
	if sh := Over(calm.Counts(), 0, 4, 100); sh.Mean != 1 || sh.Worst != 1 {
		t.Errorf("unstalled share %+v, want 1 and 1", sh)
	}
}

// A client slower than its grid runs back to back and reports what it managed, never more.
func TestSlowClientReportsWhatItDid(t *testing.T) {
	secs, slots := client(10*time.Millisecond, 25*time.Millisecond, 25*time.Millisecond, -1, 2*time.Second)
	for i, n := range secs.Counts()[:2] {
		if n < 33 || n > 34 {
			t.Errorf("second %d: %d completions, want 33 (each 25 ms iteration waits for the next 10 ms slot: one every 30 ms)", i, n)
		}
	}
	if slots.Missed() < 100 {
		t.Errorf("missed %d slots, want over 100", slots.Missed())
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := Percentile(ds, 99); p != 99*time.Millisecond {
		t.Errorf("p99 %s, want 99ms", p)
	}
	if p := Percentile(nil, 99); p != 0 {
		t.Errorf("p99 of nothing %s", p)
	}
}
