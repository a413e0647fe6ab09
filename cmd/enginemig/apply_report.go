package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/planrun"
	"github.com/enginemig/enginemig/plan"
)

// writeApplyMarkdown prints the end of an apply run as a document for the change ticket (apply
// --output markdown): the outcome, each table's figures (rows, each stage's time, the cut-over's
// lock, the application's p99 and throughput before and during the run), how to roll back, and
// with a whole plan converted, the MyISAM tables left or how to keep them out.
func writeApplyMarkdown(w io.Writer, results []*migration.Result, summary []planrun.Outcome, door *checkReport, err error) {
	var b strings.Builder
	converted := 0
	for _, r := range results {
		if r != nil && !r.DryRun && r.Cutover != nil {
			converted++
		}
	}
	fmt.Fprintf(&b, "# enginemig apply: %d table(s) converted\n\n", converted)
	fmt.Fprintf(&b, "Finished %s with exit code %d (`%s`).", time.Now().UTC().Format("2006-01-02 15:04 MST"), outcome.CodeOf(err), outcome.CodeOf(err).Name())
	if err != nil {
		fmt.Fprintf(&b, " %s", plan.MarkdownText(err.Error()))
	}
	b.WriteString("\n\n## Tables\n\n")
	b.WriteString("| table | outcome | rows | copy | index build | verification | cut-over lock | total | p99 read before / during | statements/s before / during |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		if r != nil {
			writeResultRow(&b, r)
		}
	}
	for _, o := range summary {
		if o.Outcome != "converted" {
			fmt.Fprintf(&b, "| `%s` | %s | | | | | | | | |\n", o.Table, plan.MarkdownText(strings.TrimSpace(o.Outcome+" "+o.Reason)))
		}
	}
	b.WriteString("\n")
	if converted > 0 {
		b.WriteString("## Rolling back\n\nEach original is kept, MyISAM, until `enginemig cleanup --drop-old`; `rollback` swaps it back with every write made since the cut-over " +
			"(after a binlog capture it needs the binlogs since then: the window is the binlog retention).\n\n```\n")
		for _, r := range results {
			if r != nil && !r.DryRun && r.Cutover != nil {
				fmt.Fprintf(&b, "enginemig rollback -D %s -t %s    # original kept as %s\n", r.Schema, r.Table, r.OldTable)
			}
		}
		b.WriteString("```\n\n")
	}
	if door != nil {
		b.WriteString("## MyISAM left\n\n```\n")
		writeCheck(&b, *door)
		b.WriteString("```\n")
	}
	io.WriteString(w, b.String())
}

func writeResultRow(b *strings.Builder, r *migration.Result) {
	verb := "converted"
	switch {
	case r.DryRun:
		verb = "dry run (unchanged)"
	case r.Cutover == nil:
		verb = "not swapped"
	}
	d := func(t time.Duration) string {
		if t <= 0 {
			return "-"
		}
		return t.Round(time.Millisecond).String()
	}
	verify, lock := "-", "-"
	if r.Verify != nil {
		verify = fmt.Sprintf("%s (%d chunks, %d recopied)", d(r.Verify.Duration), r.Verify.Chunks, r.Verify.Repaired)
	}
	if r.Cutover != nil {
		lock = fmt.Sprintf("%s (%d attempt(s))", d(r.Cutover.LockHeld), r.Cutover.Attempts)
	}
	latency, rate := "-", "-"
	if p := r.Pace; p != nil && p.Reads > 0 {
		ms := func(s float64) string {
			return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
		}
		latency = ms(p.Baseline) + " / " + ms(p.P99)
		if p.RateBefore > 0 {
			rate = fmt.Sprintf("%.0f / %.0f (%.0f%%)", p.RateBefore, p.RateDuring, 100*p.RateDuring/p.RateBefore)
		}
	}
	fmt.Fprintf(b, "| `%s.%s` | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Schema, r.Table, verb, r.RowsCopied,
		d(r.CopyTime), d(r.IndexTime), verify, lock, d(r.TotalTime), latency, rate)
}
