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
	probe      time.Duration // one primary-key read of the table
	running    float64       // Threads_running
}

// The governor's bounds. The application is out of room when, averaged over the last few
// measurements, its throughput falls below minRateShare of its rate before the copy, its read
// takes more than twice its usual time plus probeSlack, or more than twice its usual sessions
// plus runningSlack are running.
const (
	minRateShare = 0.9
	probeSlack   = time.Millisecond
	runningSlack = 4
	smoothing    = 0.3 // weight of a new measurement in the averages
	calmSteps    = 5   // calm measurements before the next level up
	relearnSteps = 10  // measurements at level 0 before the baselines follow the application
)

// idleness says when the application counts as idle: fewer statements and writes a second.
type idleness struct{ rate, writes float64 }

func (i idleness) of(s signals) bool { return s.rate < i.rate && s.writeRate < i.writes }

// governor turns measurements into a level (Gentle's doc). Not safe for concurrent use.
type governor struct {
	level int
	calm  int // calm measurements since the last change
	low   int // measurements at level 0 in a row
	base  signals
	avg   signals
	idle  idleness
	why   string // the last back-off's cause
}

// newGovernor starts from the measurements taken before the copy: their mean rate and Threads_running
// and their median probe. An idle application gets the top level, a busy one the middle (one
// worker resting as long as each chunk held the source).
func newGovernor(learn []signals, idle idleness) governor {
	g := governor{idle: idle, level: gentleTop}
	var probes []time.Duration
	for _, s := range learn {
		g.base.rate += s.rate / float64(len(learn))
		g.base.writeRate += s.writeRate / float64(len(learn))
		g.base.running += s.running / float64(len(learn))
		probes = append(probes, s.probe)
	}
	sort.Slice(probes, func(a, b int) bool { return probes[a] < probes[b] })
	if len(probes) > 0 {
		g.base.probe = probes[len(probes)/2]
	}
	g.avg = g.base
	if !idle.of(g.base) {
		g.level = 3
	}
	return g
}

// step takes one measurement.
func (g *governor) step(s signals) {
	g.avg.rate += smoothing * (s.rate - g.avg.rate)
	g.avg.probe += time.Duration(smoothing * float64(s.probe-g.avg.probe))
	g.avg.running += smoothing * (s.running - g.avg.running)
	g.avg.writeRate += smoothing * (s.writeRate - g.avg.writeRate)
	if g.idle.of(g.avg) {
		g.level, g.calm = gentleTop, 0 // nobody to leave room for
		return
	}
	if g.idle.of(g.base) { // the application arrived after the copy began
		g.base = g.avg
		g.pressed(fmt.Sprintf("the application started: %.0f statements/s", g.avg.rate))
		return
	}
	if why := g.pressure(); why != "" {
		g.pressed(why)
	} else if g.calm++; g.calm >= calmSteps {
		g.level, g.calm = min(g.level+1, gentleTop), 0
	}
	g.follow()
}

// pressure names the signal out of bounds, or returns "".
func (g *governor) pressure() string {
	switch {
	case g.avg.rate < minRateShare*g.base.rate:
		return fmt.Sprintf("application throughput %.0f statements/s, %.0f%% of its %.0f/s", g.avg.rate, 100*g.avg.rate/g.base.rate, g.base.rate)
	case g.avg.probe > 2*g.base.probe+probeSlack:
		return fmt.Sprintf("a primary-key read takes %s (usually %s)", g.avg.probe.Round(10*time.Microsecond), g.base.probe.Round(10*time.Microsecond))
	case g.avg.running > 2*g.base.running+runningSlack:
		return fmt.Sprintf("Threads_running %.0f (usually %.0f)", g.avg.running, g.base.running)
	}
	return ""
}

// pressed drops two levels.
func (g *governor) pressed(why string) {
	g.level, g.calm, g.why = max(g.level-2, 0), 0, why
}

// follow lets the baselines follow the application: a rate above the baseline is the application
// growing; at level 0 for a while the copy is mostly out of the way, so what is measured is the
// application's own (a busier hour than when the copy began).
func (g *governor) follow() {
	if g.avg.rate > g.base.rate {
		g.base.rate += 0.1 * (g.avg.rate - g.base.rate)
	}
	if g.level > 0 {
		g.low = 0
		return
	}
	if g.low++; g.low >= relearnSteps {
		g.base.rate += 0.2 * (g.avg.rate - g.base.rate)
		g.base.probe += time.Duration(0.2 * float64(g.avg.probe-g.base.probe))
		g.base.running += 0.2 * (g.avg.running - g.base.running)
	}
}
