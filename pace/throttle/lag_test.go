package throttle

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"
)

// The lag arithmetic without servers: which of our writes the replica has applied, and how long
// ago we wrote the first one it has not.
func TestLagFromSequence(t *testing.T) {
	now := time.Now()
	thr := New(nil, Config{Replicas: make([]*sql.DB, 1), MaxLag: time.Second, Interval: 100 * time.Millisecond})
	thr.started = true
	for seq := int64(1); seq <= 10; seq++ {
		thr.hb.recordWrite(seq, nil, now.Add(time.Duration(seq-10)*100*time.Millisecond))
	}
	cases := []struct {
		applied int64
		want    time.Duration
	}{
		{10, 0},                     // everything applied
		{9, 0},                      // missing only the write made just now
		{5, 400 * time.Millisecond}, // write 6 was made 400 ms ago
		{0, 900 * time.Millisecond}, // nothing applied: since the first write
		{12, 0},                     // ahead of what we know (cannot happen with own ids): not lagging
	}
	for _, c := range cases {
		if got := thr.lagLocked(c.applied, now); got != c.want {
			t.Errorf("applied %d: lag %s, want %s", c.applied, got, c.want)
		}
	}

	// Pruning keeps what the slowest replica still needs.
	thr.replicas[0].seq = sample{value: 5, at: now}
	thr.pruneLocked()
	if got := thr.lagLocked(5, now); got != 400*time.Millisecond {
		t.Fatalf("after pruning: lag %s, want 400ms", got)
	}
	if thr.hb.history[0].seq != 6 {
		t.Fatalf("history starts at %d, want 6", thr.hb.history[0].seq)
	}

	// Fail closed: a failed read, a stale read, and a heartbeat the primary stopped accepting.
	thr.replicas[0].seq = sample{err: errors.New("boom"), at: now}
	if v := thr.evaluateLocked(now); !v.throttled || !strings.Contains(strings.Join(v.reasons, ";"), "cannot measure lag on replica1: boom") {
		t.Fatalf("failed read: %+v", v)
	}
	thr.replicas[0].seq = sample{value: 10, at: now.Add(-time.Minute)}
	if v := thr.evaluateLocked(now); !v.throttled || !strings.Contains(v.reasons[0], "no answer") {
		t.Fatalf("stale read: %+v", v)
	}
	thr.replicas[0].seq = sample{value: 10, at: now}
	if v := thr.evaluateLocked(now); v.throttled {
		t.Fatalf("caught-up replica throttled: %+v", v)
	}
	thr.hb.recordWrite(11, errors.New("read-only"), now)
	if v := thr.evaluateLocked(now.Add(time.Minute)); !v.throttled || !strings.Contains(v.reasons[0], "heartbeat not written") {
		t.Fatalf("stale heartbeat: %+v", v)
	}
}
