package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	capture "github.com/enginemig/enginemig/bench/workload"
)

// Report is one bench run: what was measured and the results of each side.
type Report struct {
	// Mode is "scratch" (sample copies), "live" (write mix on the named tables, --on-live-table)
	// or "read-only" (SELECT probes on the named tables).
	Mode    string   `json:"mode"`
	Schema  string   `json:"schema"`
	Table   string   `json:"table"`
	Scratch string   `json:"scratch_database,omitempty"`
	Sample  int64    `json:"sample_rows,omitempty"`
	Mix     Mix      `json:"mix"`
	Threads []int    `json:"threads"`
	Seconds float64  `json:"seconds_per_step"`
	Warmup  float64  `json:"warmup_seconds"`
	Results []Result `json:"results"`
	// Capture is where a captured mix came from and what it held (--mix auto, --from-log, --mix
	// FILE); Coverage is the share of the table's statement time the replayed statements cover.
	Capture  *capture.Capture `json:"capture,omitempty"`
	Coverage float64          `json:"captured_coverage,omitempty"`
	Warnings []string         `json:"warnings,omitempty"`
	// Comparison is the second result against the first at each thread count, when there are two.
	Comparison []Ratio `json:"comparison,omitempty"`
}

// Ratio compares two sides at one thread count: QPS is second/first, P99 is second/first.
type Ratio struct {
	Threads int     `json:"threads"`
	QPS     float64 `json:"qps_ratio"`
	P99     float64 `json:"p99_ratio"`
}

// compare fills Comparison from the first two results.
func (r *Report) compare() {
	r.Comparison = nil
	if len(r.Results) != 2 {
		return
	}
	for _, a := range r.Results[0].Steps {
		b, ok := r.Results[1].Step(a.Threads)
		if !ok {
			continue
		}
		r.Comparison = append(r.Comparison, Ratio{Threads: a.Threads, QPS: ratio(b.Total.QPS, a.Total.QPS), P99: ratio(b.Total.P99, a.Total.P99)})
	}
}

// ratio is b/a, with 0 when a is 0 (nothing measured: no meaningful ratio).
func ratio(b, a float64) float64 {
	if a == 0 {
		return 0
	}
	return b / a
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as terminal tables: totals per step and side, then each statement
// type, then the background reports.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	switch r.Mode {
	case "scratch":
		fmt.Fprintf(&b, "Benchmark of %s.%s: scratch copies of %d rows in %s (MyISAM and InnoDB), the live table was only read\n",
			r.Schema, r.Table, r.Sample, r.Scratch)
	case "live":
		fmt.Fprintf(&b, "Benchmark of %s.%s: write mix run directly on the named table(s) (--on-live-table)\n", r.Schema, r.Table)
	default:
		fmt.Fprintf(&b, "Benchmark of %s.%s: read-only probes\n", r.Schema, r.Table)
	}
	if r.Capture != nil {
		r.writeCaptured(&b)
	} else {
		fmt.Fprintf(&b, "Mix %s (select:update:insert[:delete]), from %s; %gs per step after %gs warm-up\n",
			r.Mix, r.Mix.Source, r.Seconds, r.Warmup)
	}
	if len(r.Results) > 0 {
		for _, st := range r.Results[0].Statements {
			if r.Capture != nil && isReplayName(st.Name) {
				continue
			}
			kind := fmt.Sprintf("weight %d", st.Weight)
			if st.Weight == 0 {
				kind = "background loop"
			}
			fmt.Fprintf(&b, "  %-8s %-16s %s\n", st.Name, kind, st.SQL)
		}
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "threads\tside\tengine\tqps\tp50 ms\tp95 ms\tp99 ms\tmax ms\terrors\tqps ratio\tp99 ratio\t")
	for _, n := range r.Threads {
		for i, res := range r.Results {
			s, ok := res.Step(n)
			if !ok {
				continue
			}
			qr, pr := "", ""
			if i == 1 {
				for _, c := range r.Comparison {
					if c.Threads == n {
						qr, pr = fmt.Sprintf("%.2fx", c.QPS), fmt.Sprintf("%.2fx", c.P99)
					}
				}
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%s\t%s\t\n", n, res.Label, res.Engine,
				s.Total.QPS, s.Total.P50, s.Total.P95, s.Total.P99, s.Total.Max, s.Total.Errors, qr, pr)
		}
	}
	tw.Flush()
	b.WriteString("\nPer statement type:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "threads\tside\tstatement\tqps\tp50 ms\tp95 ms\tp99 ms\tmax ms\terrors\t")
	for _, n := range r.Threads {
		for _, res := range r.Results {
			s, ok := res.Step(n)
			if !ok {
				continue
			}
			for _, o := range append(append([]Stats{}, s.Ops...), s.Background...) {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%.1f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t\n", n, res.Label, o.Name, o.QPS, o.P50, o.P95, o.P99, o.Max, o.Errors)
			}
		}
	}
	tw.Flush()
	var errs []string
	for _, res := range r.Results {
		for _, s := range res.Steps {
			for _, o := range append(append([]Stats{}, s.Ops...), s.Background...) {
				if o.FirstError != "" {
					errs = append(errs, fmt.Sprintf("  %s %s at %d threads: %s", res.Label, o.Name, s.Threads, o.FirstError))
				}
			}
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nErrors (first of each kind):\n" + strings.Join(errs, "\n") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
