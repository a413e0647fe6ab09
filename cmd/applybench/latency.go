package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// stmt is one application statement: when it completed and how long it took.
type stmt struct {
	end  int64 // Unix nanoseconds
	took int32 // microseconds
}

// stmts are one load thread's statements, reads (SELECTs) apart from writes (UPDATE, INSERT,
// DELETE): MyISAM makes a write wait for a chunk's read lock, a read only when a write queued
// behind it.
type stmts struct{ reads, writes []stmt }

func (s *stmts) add(write bool, end time.Time, took time.Duration) {
	x := stmt{end: end.UnixNano(), took: int32(min(took.Microseconds(), 1<<31-1))}
	if write {
		s.writes = append(s.writes, x)
	} else {
		s.reads = append(s.reads, x)
	}
}

// merge joins the threads' statements.
func merge(per []stmts) stmts {
	var all stmts
	for _, p := range per {
		all.reads, all.writes = append(all.reads, p.reads...), append(all.writes, p.writes...)
	}
	return all
}

// latency is the p50 and p99 of reads and writes over one span, in milliseconds (the JSON's
// unit, as bench's reports).
type latency struct {
	Reads      int64   `json:"reads"`
	ReadP50Ms  float64 `json:"read_p50_ms"`
	ReadP99Ms  float64 `json:"read_p99_ms"`
	Writes     int64   `json:"writes"`
	WriteP50Ms float64 `json:"write_p50_ms"`
	WriteP99Ms float64 `json:"write_p99_ms"`
}

// latencyOf summarises the statements that completed in [from, to).
func latencyOf(s stmts, from, to time.Time) latency {
	r, w := within(s.reads, from, to), within(s.writes, from, to)
	return latency{Reads: int64(len(r)), ReadP50Ms: pct(r, 50), ReadP99Ms: pct(r, 99),
		Writes: int64(len(w)), WriteP50Ms: pct(w, 50), WriteP99Ms: pct(w, 99)}
}

func within(ss []stmt, from, to time.Time) []int32 {
	var out []int32
	a, b := from.UnixNano(), to.UnixNano()
	for _, s := range ss {
		if s.end >= a && s.end < b {
			out = append(out, s.took)
		}
	}
	return out
}

// pct is the p-th percentile (nearest rank) of micros, in milliseconds; 0 for none.
func pct(micros []int32, p float64) float64 {
	if len(micros) == 0 {
		return 0
	}
	slices.Sort(micros)
	i := int(float64(len(micros))*p/100+0.999999) - 1
	return float64(micros[min(max(i, 0), len(micros)-1)]) / 1000
}

// stageLatency is the application's latency during one stage of a conversion.
type stageLatency struct {
	Stage string  `json:"stage"`
	Took  float64 `json:"seconds"`
	latency
}

// latencyByStage cuts the conversion [t0, t1) into its stages as shares does (marks; none: one
// "conversion" stage; before the first mark, "start") and gives each one's latency.
func latencyByStage(s stmts, t0, t1 time.Time, marks []stageMark) []stageLatency {
	var out []stageLatency
	from, stage := t0, stageAt(marks, t0)
	if len(marks) == 0 {
		stage = "conversion"
	}
	cut := func(to time.Time) {
		if !to.After(from) {
			return
		}
		name := stage
		if name == "" {
			name = "start"
		}
		out = append(out, stageLatency{Stage: name, Took: to.Sub(from).Seconds(), latency: latencyOf(s, from, to)})
		from = to
	}
	for _, m := range marks {
		if !m.at.After(t0) || !m.at.Before(t1) {
			continue
		}
		if m.stage != stage {
			cut(m.at)
			stage = m.stage
		}
	}
	cut(t1)
	return out
}

// formatLatency is one span's latency for the text report.
func formatLatency(l latency) string {
	return fmt.Sprintf("reads p50 %s p99 %s, writes p50 %s p99 %s", ms(l.ReadP50Ms), ms(l.ReadP99Ms), ms(l.WriteP50Ms), ms(l.WriteP99Ms))
}

// formatStageLatency lists each stage's latency, named as formatShares names them.
func formatStageLatency(per []stageLatency) string {
	parts := make([]string, len(per))
	for i, s := range per {
		name := stageNames[s.Stage]
		if name == "" {
			name = s.Stage
		}
		parts[i] = fmt.Sprintf("%s %.1fs: %s", name, s.Took, formatLatency(s.latency))
	}
	return strings.Join(parts, "; ")
}

func ms(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2fms", v)
	}
	return fmt.Sprintf("%.1fms", v)
}
