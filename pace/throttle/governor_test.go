package throttle

import (
	"testing"
	"time"
)

var testIdle = idleness{rate: 1000, writes: 10}

func busy(rate float64, probe time.Duration, running float64) signals {
	return signals{rate: rate, writeRate: rate / 3, probe: probe, running: running}
}

// The governor backs off within a second when the application's reads slow down, its sessions
// pile up or its throughput falls (to the fixed pace's rest or below), keeps backing off to its
// deepest level while that lasts, and comes back once the application recovers.
func TestGovernorBacksOffAndRecovers(t *testing.T) {
	calm := busy(5000, time.Millisecond, 3)
	for _, tc := range []struct {
		name string
		bad  signals
	}{
		{"latency", busy(5000, 8*time.Millisecond, 3)},
		{"threads running", busy(5000, time.Millisecond, 20)},
		{"throughput", busy(4200, time.Millisecond, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGovernor([]signals{calm, calm, calm}, testIdle, DefaultLatencyFactor)
			for i := 0; i < 40; i++ {
				g.step(calm)
			}
			if g.level != gentleTop {
				t.Fatalf("calm application: level %d, want %d", g.level, gentleTop)
			}
			for i := 0; i < 10; i++ {
				g.step(tc.bad)
			}
			if g.level > busyStart {
				t.Fatalf("slowed application: level %d after a second (10 measurements), want %d or less", g.level, busyStart)
			}
			for i := 0; i < 20; i++ {
				g.step(tc.bad)
			}
			if g.level != 0 {
				t.Fatalf("slowed application: level %d after three seconds, want 0", g.level)
			}
			if g.why == "" {
				t.Error("no reason for the back-off")
			}
			for i := 0; i < 60; i++ {
				g.step(calm)
			}
			if g.level != gentleTop {
				t.Errorf("recovered application: level %d after 6 s, want %d", g.level, gentleTop)
			}
		})
	}
}

// An idle server gets the top level at once, and an application that arrives later is left room.
func TestGovernorIdleAndArrival(t *testing.T) {
	quiet := signals{rate: 40, probe: time.Millisecond, running: 2}
	g := newGovernor([]signals{quiet, quiet}, testIdle, DefaultLatencyFactor)
	if g.level != gentleTop {
		t.Fatalf("idle: level %d, want %d", g.level, gentleTop)
	}
	// Busy with its own work (slow reads, many running), the copy keeps going while nobody else is there.
	for i := 0; i < 10; i++ {
		g.step(signals{rate: 300, probe: 20 * time.Millisecond, running: 6})
	}
	if g.level != gentleTop {
		t.Fatalf("idle with enginemig's own reads: level %d, want %d", g.level, gentleTop)
	}
	for i := 0; i < 10 && g.level == gentleTop; i++ {
		g.step(busy(6000, time.Millisecond, 3))
	}
	if g.level >= gentleTop {
		t.Errorf("application arrived: level %d, want below %d", g.level, gentleTop)
	}
}

// An application stuck behind a lock runs few statements but keeps its sessions running: that is
// a slowdown to back off from, not an idle server.
func TestGovernorStuckApplicationIsNotIdle(t *testing.T) {
	calm := busy(5000, time.Millisecond, 3)
	g := newGovernor([]signals{calm, calm, calm}, testIdle, DefaultLatencyFactor)
	for i := 0; i < 40; i++ {
		g.step(calm)
	}
	for i := 0; i < 100; i++ {
		g.step(signals{rate: 20, probe: time.Millisecond, running: 18})
		if i >= 20 && g.level != 0 {
			t.Fatalf("application stuck for %d measurements: level %d, want 0", i+1, g.level)
		}
	}
}

// A busy application starts in the middle, not at full speed: one worker resting as long as each
// chunk held the source.
func TestGovernorStartsGentleUnderLoad(t *testing.T) {
	s := busy(5000, time.Millisecond, 3)
	if g := newGovernor([]signals{s, s, s}, testIdle, DefaultLatencyFactor); g.level != busyStart || restRatios[g.level] != 1 {
		t.Errorf("under load: level %d (rest %.2f times the lock), want %d (rest 1)", g.level, restRatios[g.level], busyStart)
	}
}

// At level 0 the baselines follow the application, but its usual rate only up: an application
// that keeps losing a tenth of its throughput to the copy keeps the copy at level 0 however long
// that lasts.
func TestGovernorUsualRateOnlyRises(t *testing.T) {
	calm := busy(5000, time.Millisecond, 3)
	g := newGovernor([]signals{calm, calm, calm}, testIdle, DefaultLatencyFactor)
	for i := 0; i < 300; i++ {
		g.step(busy(4200, time.Millisecond, 3))
	}
	if g.level != 0 || g.base.rate != 5000 {
		t.Fatalf("after 30 s at 84%% of its rate: level %d, usual rate %.0f; want 0 and 5000", g.level, g.base.rate)
	}
}
