package bench

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// MinCoverage is the share of the table's statement time below which a captured mix gets a
// warning: the statements left out could be the ones that decide the verdict.
const MinCoverage = 0.8

func isReplayName(name string) bool { return strings.HasPrefix(name, "stmt") }

// coverage is the share of the table's statement time that the replayed statements cover.
func coverage(stats []ReplayStat) float64 {
	var c float64
	for _, s := range stats {
		if s.NotReplayed == "" {
			c += s.Share
		}
	}
	return c
}

// noteCapture fills the report's coverage and warnings from the first side's replay.
func (r *Report) noteCapture() {
	if r.Capture == nil || len(r.Results) == 0 {
		return
	}
	r.Coverage = coverage(r.Results[0].Replay)
	what := "statement time"
	if !r.Capture.Timed {
		what = "statement count (the source does not time statements)"
	}
	if r.Coverage < MinCoverage {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the replayed statements cover %.0f%% of the table's %s (below %.0f%%): the verdict may miss what the others do; see the statements not replayed",
			100*r.Coverage, what, 100*MinCoverage))
	}
	for _, s := range r.Results[0].Replay {
		if s.NotReplayed == "" && s.ProductionRows > 0 && s.ReplayRows >= 0 &&
			(s.ReplayRows > 2*s.ProductionRows || s.ReplayRows < s.ProductionRows/2) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s examines %.0f rows per run in the replay, %.0f in production (the scratch copy holds %d rows)",
				s.Name, s.ReplayRows, s.ProductionRows, r.Sample))
		}
	}
}

// writeCaptured prints the captured mix: each statement's text, weight, share of the table's
// statement time, and rows examined in production and in the replay.
func (r Report) writeCaptured(b *strings.Builder) {
	c := r.Capture
	fmt.Fprintf(b, "Mix captured from %s: %d statement shape(s) on %s.%s; the replayed ones cover %.0f%% of the table's %s\n",
		c.Source, len(c.Statements), c.Schema, c.Table, 100*r.Coverage, map[bool]string{true: "statement time", false: "statements"}[c.Timed])
	if r.Mix.Total() > 0 {
		fmt.Fprintf(b, "plus primary-key mix %s (select:update:insert[:delete])\n", r.Mix)
	}
	fmt.Fprintf(b, "%gs per step after %gs warm-up\n", r.Seconds, r.Warmup)
	if len(r.Results) == 0 {
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  statement\tweight\tshare\trows examined prod/replay\ttext")
	for _, s := range r.Results[0].Replay {
		weight := fmt.Sprint(s.Weight)
		switch {
		case s.NotReplayed != "":
			weight = "-"
		case s.Loops > 0 && s.Weight > 0:
			weight = fmt.Sprintf("%dx loop %.0f%% + %d", s.Loops, 100*s.Duty, s.Weight)
		case s.Loops > 0:
			weight = fmt.Sprintf("%dx loop %.0f%%", s.Loops, 100*s.Duty)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.1f%%\t%s / %s\t%s\n", s.Name, weight, 100*s.Share, rowsText(s.ProductionRows), rowsText(s.ReplayRows), s.Text)
		if s.NotReplayed != "" {
			fmt.Fprintf(tw, "  \t\t\t\tnot replayed: %s\n", s.NotReplayed)
		}
	}
	tw.Flush()
	for _, w := range r.Warnings {
		fmt.Fprintf(b, "WARNING: %s\n", w)
	}
}

func rowsText(v float64) string {
	if v < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f", v)
}
