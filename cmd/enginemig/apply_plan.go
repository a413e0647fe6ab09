package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration/planrun"
	"github.com/enginemig/enginemig/plan"
)

// planTargets reads a plan file and returns its tables in plan order, and those it skips because
// of their blockers. A plan that lists no table at all (plan found no MyISAM table left) returns
// neither: there is nothing to do.
func planTargets(path string, logger *slog.Logger) ([]planrun.Target, []planrun.Outcome, error) {
	p, err := plan.ReadFile(path)
	if err != nil {
		return nil, nil, outcome.New(outcome.Usage, err, "write a plan with `enginemig plan --out FILE`")
	}
	if len(p.Tables) == 0 {
		return nil, nil, nil
	}
	var out []planrun.Target
	var skipped []planrun.Outcome
	for _, t := range p.Tables {
		if b := plan.Blockers(t.Findings); len(b) > 0 {
			logger.Warn("skipping a table of the plan: it has blockers", slog.String("table", t.Schema+"."+t.Table),
				slog.Int("blockers", len(b)), slog.String("first", b[0].Message))
			skipped = append(skipped, planrun.Outcome{Table: t.Schema + "." + t.Table, Outcome: "skipped",
				Reason: fmt.Sprintf("%d blocker(s), first: [%s] %s", len(b), b[0].Check, b[0].Message)})
			continue
		}
		out = append(out, planrun.Target{Schema: t.Schema, Table: t.Table})
	}
	if len(out) == 0 {
		return nil, skipped, outcome.Errorf(outcome.Refused, "plan %s has no table without blockers", path)
	}
	return out, skipped, nil
}

// planSummary prints the per-table outcome of a plan run.
func planSummary(w io.Writer, rows []planrun.Outcome) {
	fmt.Fprintln(w, "plan summary:")
	for _, r := range rows {
		line := fmt.Sprintf("  %-40s %s", r.Table, r.Outcome)
		if r.Outcome == "converted" {
			line += fmt.Sprintf(": %d rows in %s, cut-over lock %s", r.Rows, r.Time.Round(time.Millisecond), r.LockHeld.Round(time.Millisecond))
			if e := r.Estimate; e != nil && e.ActualSeconds > 0 {
				line += fmt.Sprintf(", copy %s (estimated %s)", secs(e.ActualSeconds), secs(e.EstimatedSeconds))
			}
		}
		if r.Reason != "" {
			line += ": " + r.Reason
		}
		fmt.Fprintln(w, line)
	}
}

// planOutcome is the exit of a plan run that went through: OK when every table of the plan is
// InnoDB, Refused (4) when tables with blockers were skipped.
func planOutcome(rows []planrun.Outcome) error {
	var skipped []string
	for _, r := range rows {
		if r.Outcome == "skipped" {
			skipped = append(skipped, r.Table)
		}
	}
	if len(skipped) == 0 {
		return nil
	}
	return outcome.New(outcome.Refused, fmt.Errorf("the plan was applied in part: %d table(s) skipped for blockers (%s)", len(skipped), strings.Join(skipped, ", ")),
		"resolve their blockers (see `enginemig plan`), plan again and apply")
}
