package plan

import (
	"fmt"
	"io"
	"strings"
)

// answerChecks are the checks whose findings name statements that may answer differently on
// InnoDB: the change ticket lists them apart, for the application's owners to read.
var answerChecks = map[string]bool{"limit-without-order-by": true, "fulltext-natural": true}

// WriteMarkdown prints the plan as a document for a change ticket or a wiki page (GitHub-flavoured
// Markdown, readable as plain text too): what converts in which order, what blocks, every warning
// with its remedy, the estimates, the statements whose answers may change, how to roll back, and
// how to keep MyISAM out once the last table is converted.
func WriteMarkdown(w io.Writer, p *Plan) error {
	var b strings.Builder
	s := p.Server
	fmt.Fprintf(&b, "# MyISAM to InnoDB: %s\n\n", strings.Join(p.Databases, ", "))
	fmt.Fprintf(&b, "Planned %s by enginemig %s on %s (%s %s), as %s.\n\n", p.GeneratedAt.UTC().Format("2006-01-02 15:04 MST"),
		orDash(p.Tool), MarkdownText(s.Hostname), s.Flavor, s.Version, MarkdownText(s.User))
	writeMarkdownSummary(&b, p)
	writeMarkdownTables(&b, p)
	writeMarkdownFindings(&b, p, Blocker, "Blockers", "apply refuses these tables until each is fixed.")
	writeMarkdownFindings(&b, p, Warning, "Warnings", "apply converts these tables; each warning says what to check first.")
	writeMarkdownAnswers(&b, p)
	if len(p.Skipped) > 0 {
		b.WriteString("## Not planned\n\n")
		for _, sk := range p.Skipped {
			fmt.Fprintf(&b, "- `%s.%s`: %s\n", sk.Schema, sk.Table, MarkdownText(sk.Reason))
		}
		b.WriteString("\n")
	}
	writeMarkdownRollback(&b, p)
	writeMarkdownDoor(&b, s.Flavor)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMarkdownSummary(b *strings.Builder, p *Plan) {
	var copySeconds float64
	var binlog int64
	for _, t := range p.Tables {
		copySeconds += t.Estimate.CopySeconds
		binlog += t.Estimate.BinlogBytes
	}
	b.WriteString("## Summary\n\n")
	fmt.Fprintf(b, "| | |\n|---|---|\n| tables | %d (%d blocked) |\n| rows | %d |\n| MyISAM size | %s |\n",
		len(p.Tables), blockedTables(p), p.Totals.Rows, Human(p.Totals.DataBytes+p.Totals.IndexBytes))
	fmt.Fprintf(b, "| InnoDB size (estimated) | %s |\n| extra disk at the peak | %s (the originals are kept for rollback) |\n",
		Human(p.Totals.ProjectedBytes), Human(p.Totals.ExtraDiskBytes))
	fmt.Fprintf(b, "| binlog written by the copies | %s |\n| copy time (estimated, one table after another, at the load measured now) | %s |\n",
		Human(binlog), duration(copySeconds))
	fmt.Fprintf(b, "| findings | %d blocker(s), %d warning(s), %d info |\n\n", p.Summary.Blockers, p.Summary.Warnings, p.Summary.Infos)
	if p.HasBlockers() {
		b.WriteString("**apply refuses the blocked tables until their blockers are fixed** (below); `apply --plan` converts the others.\n\n")
	} else {
		b.WriteString("No blockers: `enginemig apply --plan FILE` converts every table below.\n\n")
	}
}

func blockedTables(p *Plan) int {
	n := 0
	for _, t := range p.Tables {
		if t.Blocked {
			n++
		}
	}
	return n
}

func writeMarkdownTables(b *strings.Builder, p *Plan) {
	if len(p.Tables) == 0 {
		b.WriteString("## Tables\n\nNo MyISAM tables to convert.\n\n")
		return
	}
	fmt.Fprintf(b, "## Tables, in the order apply converts them\n\nMost lock contention first (ranked by %s).\n\n", MarkdownText(p.RankedBy))
	b.WriteString("| # | table | rows | MyISAM | InnoDB (est.) | extra disk | binlog | copy (est.) | lock wait | copy key | status |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, t := range p.Tables {
		e := t.Estimate
		fmt.Fprintf(b, "| %d | `%s.%s` | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", t.Rank, t.Schema, t.Table, t.Rows,
			Human(e.DataBytes+e.IndexBytes), Human(e.ProjectedBytes), Human(e.ExtraDiskBytes), Human(e.BinlogBytes),
			duration(e.CopySeconds), lockWait(t.Contention), orDash(t.CopyKey), status(t.Findings))
	}
	b.WriteString("\n")
}

// writeMarkdownFindings lists every finding of severity sev, the server's first, each with its
// remedy.
func writeMarkdownFindings(b *strings.Builder, p *Plan, sev Severity, title, lead string) {
	var lines []string
	add := func(where string, fs []Finding) {
		for _, f := range fs {
			if f.Severity != sev || answerChecks[f.Check] {
				continue
			}
			line := fmt.Sprintf("- **%s** `%s`: %s", where, f.Check, MarkdownText(f.Message))
			if f.Remedy != "" {
				line += "  \n  *Remedy:* " + MarkdownText(f.Remedy)
			}
			lines = append(lines, line)
		}
	}
	add("server", p.Findings)
	for _, t := range p.Tables {
		add(t.Schema+"."+t.Table, t.Findings)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "## %s\n\n%s\n\n%s\n\n", title, lead, strings.Join(lines, "\n"))
}

func writeMarkdownAnswers(b *strings.Builder, p *Plan) {
	var lines []string
	for _, t := range p.Tables {
		for _, f := range t.Findings {
			if answerChecks[f.Check] {
				lines = append(lines, fmt.Sprintf("- `%s.%s` (%s): %s  \n  *Remedy:* %s", t.Schema, t.Table, f.Check, MarkdownText(f.Message), MarkdownText(f.Remedy)))
			}
		}
	}
	b.WriteString("## Statements whose answers may change\n\n")
	if len(lines) == 0 {
		b.WriteString("None found in the statements the server keeps (performance_schema digests); `apply` runs the application's reads on both engines before converting each table and stops on a changed answer (`enginemig answers`).\n\n")
		return
	}
	fmt.Fprintf(b, "For the application's owners: these return other rows, or rows in another order, on InnoDB. `apply` also runs the reads on both engines before converting each table and stops on a changed answer.\n\n%s\n\n", strings.Join(lines, "\n"))
}

func writeMarkdownRollback(b *strings.Builder, p *Plan) {
	if len(p.Tables) == 0 {
		return
	}
	b.WriteString("## Rolling back\n\n")
	b.WriteString("Each converted table keeps its original as `_<table>_old` until `enginemig cleanup --drop-old`. " +
		"`enginemig rollback` swaps it back with every write made since the cut-over (after a binlog capture it needs the binlogs since then: the window is the binlog retention).\n\n```\n")
	for _, t := range p.Tables {
		if !t.Blocked {
			fmt.Fprintf(b, "enginemig rollback -D %s -t %s\n", t.Schema, t.Table)
		}
	}
	b.WriteString("```\n\n")
}

// writeMarkdownDoor says how to keep MyISAM out once the last table is converted (plan --check).
func writeMarkdownDoor(b *strings.Builder, flavor string) {
	b.WriteString("## Afterwards: keeping MyISAM out\n\n")
	b.WriteString("Once the last table is converted, `enginemig plan --check` (a nightly job) exits 9 whenever a MyISAM table appears. " +
		"These settings stop new ones, strongest first; existing tables stay readable and writable:\n\n")
	b.WriteString("| setting | how | what it does | what it breaks |\n|---|---|---|---|\n")
	for _, s := range KeepMyISAMOut(flavor) {
		how := s.Statement
		if s.Persistent != "" {
			how += "; keep across restarts: " + s.Persistent
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", s.Setting, MarkdownText(how), MarkdownText(s.What), MarkdownText(s.Breaks))
	}
	b.WriteString("\n")
}

// MarkdownText keeps text from breaking a Markdown table or list: pipes escaped, lines joined.
func MarkdownText(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
