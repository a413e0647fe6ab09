package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/enginemig/enginemig/bench/arrival"
	"github.com/enginemig/enginemig/migration/control"
)

// bucket is the load's counting resolution during a conversion: fine enough to cut the seconds
// at a stage's boundaries.
const bucket = 100 * time.Millisecond

// stageMark is the stage a conversion was in from at on.
type stageMark struct {
	at    time.Time
	stage string
}

// stageWatch polls enginemig apply's control socket for its stage until ctx ends.
type stageWatch struct {
	mu    sync.Mutex
	marks []stageMark
	// onStage, when set, is called once as each stage is first seen.
	onStage func(stage string)
}

func (w *stageWatch) poll(ctx context.Context, socket string) {
	tick := time.NewTicker(25 * time.Millisecond) // status is cheap: the server is asked once a second at most
	defer tick.Stop()
	for ctx.Err() == nil {
		out, err := control.Send(ctx, socket, "status")
		if err == nil {
			var st struct {
				Stage string `json:"stage"`
			}
			if json.Unmarshal([]byte(out), &st) == nil && st.Stage != "" {
				w.mark(time.Now(), st.Stage)
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

func (w *stageWatch) mark(at time.Time, stage string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.marks); n == 0 || w.marks[n-1].stage != stage {
		w.marks = append(w.marks, stageMark{at, stage})
		if w.onStage != nil {
			w.onStage(stage)
		}
	}
}

func (w *stageWatch) list() []stageMark {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]stageMark(nil), w.marks...)
}

// stageShare is the application's throughput during one stage as a share of the target rate.
type stageShare struct {
	stage    string
	took     time.Duration
	mean     float64
	worst    float64 // the worst second's
	worstEnd time.Time
}

// shares cuts the conversion [t0, t1) into its stages (marks; none: one "conversion" stage) and
// gives each one's mean and worst second. counts are per bucket from t0. A stage shorter than a
// second (the cut-over) is judged on the second around it.
func shares(counts []int64, t0, t1 time.Time, rate float64, marks []stageMark) (all stageShare, per []stageShare) {
	n := int((t1.Sub(t0) + bucket - 1) / bucket)
	for len(counts) < n {
		counts = append(counts, 0)
	}
	perBucket := rate * bucket.Seconds()
	label := make([]string, n)
	for i := range label {
		label[i] = stageAt(marks, t0.Add(time.Duration(i)*bucket+bucket/2))
		if label[i] == "" {
			label[i] = "start"
		}
	}
	all = window(counts, 0, n, perBucket, t0)
	all.stage = "conversion"
	for a := 0; a < n; {
		b := a
		for b < n && label[b] == label[a] {
			b++
		}
		s := window(counts, a, b, perBucket, t0)
		s.stage = label[a]
		per = append(per, s)
		a = b
	}
	return all, per
}

// window summarises buckets [a, b): the mean, and the worst of its seconds (for a span under a
// second, the second around it).
func window(counts []int64, a, b int, perBucket float64, t0 time.Time) stageShare {
	per := int(time.Second / bucket)
	s := stageShare{took: time.Duration(b-a) * bucket, worst: -1}
	var sum int64
	for i := a; i < b; i++ {
		sum += counts[i]
	}
	s.mean = float64(sum) / (float64(b-a) * perBucket)
	lo, hi := a, b
	if hi-lo < per { // widen to a second, within the conversion
		lo = max(0, min(lo-(per-(hi-lo))/2, len(counts)-per))
		hi = min(len(counts), lo+per)
	}
	for i := lo; i < hi; i += per {
		end := min(i+per, hi)
		if end-i < per/2 && i > lo { // a short tail joins the previous second
			continue
		}
		sh := arrival.Over([]int64{sumOf(counts[i:end])}, 0, 1, perBucket*float64(end-i))
		if s.worst < 0 || sh.Mean < s.worst {
			s.worst, s.worstEnd = sh.Mean, t0.Add(time.Duration(end)*bucket)
		}
	}
	return s
}

func sumOf(c []int64) (n int64) {
	for _, v := range c {
		n += v
	}
	return n
}

// stageNames maps apply's stages to the names in the report.
var stageNames = map[string]string{"copy": "copy", "indexes": "index build (+ verify beside)", "verify": "verification", "cutover": "cut-over"}

func formatShares(per []stageShare) string {
	var b strings.Builder
	for i, s := range per {
		if i > 0 {
			b.WriteString("; ")
		}
		name := stageNames[s.stage]
		if name == "" {
			name = s.stage
		}
		fmt.Fprintf(&b, "%s %.1fs: %.0f%% mean, worst second %.0f%%", name, s.took.Seconds(), 100*s.mean, 100*s.worst)
	}
	return b.String()
}

// formatGaps lists write stalls with when each ended and, for enginemig, the stage it ended in.
func formatGaps(gaps []writeGap, marks []stageMark) string {
	out := make([]string, len(gaps))
	for i, g := range gaps {
		out[i] = fmt.Sprintf("%s ended %s", g.d.Round(time.Millisecond), g.end.UTC().Format("15:04:05.000"))
		if stage := stageAt(marks, g.end); stage != "" {
			out[i] += " (" + stage + ")"
		}
	}
	return strings.Join(out, ", ")
}

// stageAt is the stage the conversion was in at t: the last mark at or before it ("" before the
// first).
func stageAt(marks []stageMark, t time.Time) string {
	stage := ""
	for _, m := range marks {
		if !m.at.After(t) {
			stage = m.stage
		}
	}
	return stage
}
