package plan

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText prints the plan for a terminal: server findings, the ranked table list, then each
// table's findings. Blockers are upper-case and marked with "!!" so they stand out without colour
// (output is often piped or pasted into tickets).
func WriteText(w io.Writer, p *Plan) error {
	var b strings.Builder
	s := p.Server
	fmt.Fprintf(&b, "Server %s (%s) as %s; databases: %s\n", s.Version, s.Hostname, s.User, strings.Join(p.Databases, ", "))
	if len(p.Findings) > 0 {
		b.WriteString("\nServer findings:\n")
		writeFindings(&b, p.Findings, "  ")
	}
	writeGalera(&b, p)
	if len(p.Tables) == 0 {
		b.WriteString("\nNo MyISAM tables to convert.\n")
	} else {
		fmt.Fprintf(&b, "\nTables, most lock contention first (ranked by %s):\n", p.RankedBy)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tTABLE\tROWS\tMYISAM\tINNODB (est.)\tEXTRA DISK\tCOPY (est.)\tLOCK WAIT\tSTATUS")
		for _, t := range p.Tables {
			fmt.Fprintf(tw, "  %d\t%s.%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Rank, t.Schema, t.Table, t.Rows,
				Human(t.Estimate.DataBytes+t.Estimate.IndexBytes), Human(t.Estimate.ProjectedBytes), Human(t.Estimate.ExtraDiskBytes),
				duration(t.Estimate.CopySeconds), lockWait(t.Contention), status(t.Findings))
		}
		tw.Flush()
		for _, t := range p.Tables {
			if len(t.Findings) == 0 && len(t.Contention.Statements) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n%s.%s (copy key: %s):\n", t.Schema, t.Table, orDash(t.CopyKey))
			writeFindings(&b, t.Findings, "  ")
			writeLockStatements(&b, t.Contention.Statements)
		}
	}
	for _, sk := range p.Skipped {
		fmt.Fprintf(&b, "\nskipped %s.%s: %s", sk.Schema, sk.Table, sk.Reason)
	}
	if len(p.Skipped) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%d table(s), %d blocker(s), %d warning(s), %d info. ", len(p.Tables), p.Summary.Blockers, p.Summary.Warnings, p.Summary.Infos)
	if p.HasBlockers() {
		b.WriteString("!! apply will refuse the blocked tables until the blockers are fixed.\n")
	} else {
		b.WriteString("No blockers.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFindings(b *strings.Builder, fs []Finding, indent string) {
	for _, f := range fs {
		label := string(f.Severity)
		if f.Severity == Blocker {
			label = "!! BLOCKER"
		}
		scope := ""
		if f.Schema != "" {
			scope = " (database " + f.Schema + ")"
		}
		fmt.Fprintf(b, "%s%-10s %s%s: %s\n", indent, label, f.Check, scope, f.Message)
		if f.Remedy != "" {
			fmt.Fprintf(b, "%s%-10s remedy: %s\n", indent, "", f.Remedy)
		}
	}
}

func status(fs []Finding) string {
	var c Counts
	c.add(fs)
	switch {
	case c.Blockers > 0:
		return fmt.Sprintf("!! BLOCKED (%d)", c.Blockers)
	case c.Warnings > 0:
		return fmt.Sprintf("ok, %d warning(s)", c.Warnings)
	}
	return "ok"
}

func duration(sec float64) string {
	if sec == 0 {
		return "-"
	}
	d := time.Duration(sec * float64(time.Second))
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func lockWait(c Contention) string {
	if !c.Available {
		return "n/a"
	}
	return duration(c.LockWaitSeconds)
}

// writeLockStatements names the statements that waited for the table's lock: what bench --mix
// auto would replay, and what to look at in the application.
func writeLockStatements(b *strings.Builder, sts []LockStatement) {
	if len(sts) == 0 {
		return
	}
	b.WriteString("  statements waiting for the table lock (performance_schema statement digests):\n")
	for _, s := range sts {
		fmt.Fprintf(b, "    %8s lock wait over %d run(s): %s\n", duration(s.LockWaitSeconds), s.Count, clip(s.Text, maxStatementText))
	}
}

// maxStatementText is how much of a statement's digest text a terminal line shows (a multi-row
// INSERT's digest runs to kilobytes); --output json has the whole text.
const maxStatementText = 160

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
