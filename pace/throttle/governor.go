package throttle

import (
	"fmt"
	"sort"
	"time"
)

// signals is one measurement of the application (Gentle.measure), or a baseline or an average of
// them.
type signals struct {
	at         time.Time
	statements int64         // the server's SELECT+INSERT+UPDATE counter
	writes     int64         // its INSERT+UPDATE part
	rate       float64       // statements a second since the previous measurement
	writeRate  float64       // INSERTs and UPDATEs a second
	probe      time.Duration // one primary-key read of the table: the latest
	reads      []probeRead   // the reads completed since the previous measurement
	locks      []lockSpan    // the chunks' locks of the last second
	running    float64       // Threads_running
}

// The governor's bounds. The application is out of room when its throughput, averaged over the
// last few measurements, falls under minShare of its usual; when its read (the median of the last
// probeWindow) takes more than twice its usual time plus probeSlack; or when, averaged the same
// way, more than twice its usual sessions plus runningSlack are running. The throughput is what
// the application loses, so it is the bound that holds it to minShare; an application with little
// slack in its latency loses it before its read doubles. An application that runs as fast as it
// can loses some throughput to any other work, so under it the copy mostly stays at level 0 until
// the baselines follow (follow).
//
// probeSlack: a read that meets a chunk waits for the rest of that chunk's lock (up to
// --chunk-time), which is the copy's normal cost, not the application running out of room. Too
// little slack makes the copy back off on that alone and take longer for nothing; more lets the
// application's p99 rise a little.
// Figures: docs/bench/constants.md, "Measurements behind the code's constants".
const (
	minShare     = 0.9
	probeSlack   = 4 * time.Millisecond
	probeWindow  = 5
	runningSlack = 4
	smoothing    = 0.3 // weight of a new measurement in the averages
	calmSteps    = 5   // calm measurements before the next level up
	settleSteps  = 3   // measurements after a back-off before another: let it take effect
	relearnSteps = 30  // measurements at level 0 before the baselines follow the application
)

// idleness says when the application counts as idle: fewer statements and writes a second.
type idleness struct{ rate, writes float64 }

func (i idleness) of(s signals) bool { return s.rate < i.rate && s.writeRate < i.writes }

// governor turns measurements into a level (Gentle's doc). Not safe for concurrent use.
type governor struct {
	level  int
	calm   int             // calm measurements since the last change
	settle int             // measurements left before another back-off
	low    int             // measurements at level 0 in a row
	probes []time.Duration // the last probeWindow reads
	base   signals
	avg    signals
	idle   idleness
	why    string      // the last back-off's cause
	lat    latencyRule // the latency target (latency.go)
}

// newGovernor starts from the measurements taken before the copy: their mean rate and Threads_running,
// their median probe, and all their reads for the latency target (latencyFactor, latency.go). An
// idle application gets the top level, a busy one the middle (one worker resting as long as each
// chunk held the source).
func newGovernor(learn []signals, idle idleness, latencyFactor float64) governor {
	g := governor{idle: idle, level: gentleTop}
	var probes, reads []time.Duration
	for _, s := range learn {
		g.base.rate += s.rate / float64(len(learn))
		g.base.writeRate += s.writeRate / float64(len(learn))
		g.base.running += s.running / float64(len(learn))
		probes = append(probes, s.probe)
		for _, r := range s.reads {
			reads = append(reads, r.took)
		}
	}
	g.base.probe = median(probes)
	g.avg = g.base
	g.lat = newLatencyRule(latencyFactor, reads)
	if !idle.of(g.base) {
		g.level = busyStart
	}
	return g
}

// step takes one measurement.
func (g *governor) step(s signals) {
	g.avg.rate += smoothing * (s.rate - g.avg.rate)
	g.probes = append(g.probes, s.probe)
	if len(g.probes) > probeWindow {
		g.probes = g.probes[1:]
	}
	g.avg.probe = median(g.probes)
	g.avg.running += smoothing * (s.running - g.avg.running)
	g.avg.writeRate += smoothing * (s.writeRate - g.avg.writeRate)
	idle := g.idle.of(g.avg) && !g.stalled()
	g.lat.step(s.at, s.reads, s.locks, !idle)
	if idle {
		g.level, g.calm = gentleTop, 0 // nobody to leave room for
		return
	}
	if g.idle.of(g.base) { // the application arrived after the copy began
		g.base = g.avg
		g.pressed(fmt.Sprintf("the application started: %.0f statements/s", g.avg.rate))
		return
	}
	if g.settle > 0 {
		g.settle--
	} else if why := g.pressure(); why != "" {
		g.pressed(why)
	} else if g.lat.stuck { // the latency target's last resort (latency.go): never under busyStart
		g.calm = 0
		if g.level > busyStart {
			g.pressed(g.lat.why())
			g.level, g.lat.stuck = max(g.level, busyStart), false
		}
	} else if g.calm++; g.calm >= calmSteps {
		g.level, g.calm = min(g.level+1, gentleTop), 0
	}
	g.follow()
}

// pressure names the signal out of bounds, or returns "".
func (g *governor) pressure() string {
	switch {
	case g.stalled():
		return fmt.Sprintf("the application stalled: %.0f statements/s (usually %.0f) with %.0f sessions running (usually %.0f)",
			g.avg.rate, g.base.rate, g.avg.running, g.base.running)
	case g.avg.rate < minShare*g.base.rate:
		return fmt.Sprintf("the application's throughput fell to %.0f statements/s (usually %.0f)", g.avg.rate, g.base.rate)
	case g.avg.probe > 2*g.base.probe+probeSlack:
		return fmt.Sprintf("a primary-key read takes %s (usually %s)", g.avg.probe.Round(10*time.Microsecond), g.base.probe.Round(10*time.Microsecond))
	case g.avg.running > 2*g.base.running+runningSlack:
		return fmt.Sprintf("Threads_running %.0f (usually %.0f)", g.avg.running, g.base.running)
	}
	return ""
}

// stalled reports an application that runs under half its usual statements while more of its
// sessions than usual keep running: stuck behind a lock or starved of cores, not idle.
func (g *governor) stalled() bool {
	return g.avg.rate < 0.5*g.base.rate && g.avg.running > g.base.running+2
}

// pressed drops two levels, and lets the next few measurements show what that did.
func (g *governor) pressed(why string) {
	g.level, g.calm, g.settle, g.why = max(g.level-2, 0), 0, settleSteps, why
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[len(s)/2]
}

// follow lets the baselines follow the application: at level 0 for a while the copy is mostly out
// of the way, so what is measured is the application's own (a busier hour than when the copy
// began). The usual rate only rises: at level 0 the copy still takes a share, and a rate that
// followed it down would be a bound that no longer holds the application to minShare. So an
// application whose demand falls for good keeps the copy near level 0 until it comes back.
// Not while it runs under half its usual rate: a stalled application is not the new normal.
func (g *governor) follow() {
	if g.level > 0 || g.avg.rate < 0.5*g.base.rate {
		g.low = 0
		return
	}
	if g.low++; g.low >= relearnSteps {
		g.base.rate += 0.2 * max(0, g.avg.rate-g.base.rate)
		g.base.probe += time.Duration(0.2 * float64(g.avg.probe-g.base.probe))
		g.base.running += 0.2 * (g.avg.running - g.base.running)
	}
}
