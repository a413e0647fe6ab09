package main

import (
	"log/slog"

	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/plan"
)

// planTargets reads a plan file and returns its tables in plan order, skipping (and reporting)
// tables with blockers.
func planTargets(path string, logger *slog.Logger) ([]target, error) {
	p, err := plan.ReadFile(path)
	if err != nil {
		return nil, outcome.New(outcome.Usage, err, "write a plan with `enginemig plan --out FILE`")
	}
	var out []target
	for _, t := range p.Tables {
		if b := plan.Blockers(t.Findings); len(b) > 0 {
			logger.Warn("skipping a table of the plan: it has blockers", slog.String("table", t.Schema+"."+t.Table),
				slog.Int("blockers", len(b)), slog.String("first", b[0].Message))
			continue
		}
		out = append(out, target{t.Schema, t.Table})
	}
	if len(out) == 0 {
		return nil, outcome.Errorf(outcome.Refused, "plan %s has no table without blockers", path)
	}
	return out, nil
}
