package main

import (
	"fmt"
	"io"

	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/plan"
)

// planTargets reads a plan file and returns its tables in plan order, skipping (and reporting)
// tables with blockers.
func planTargets(path string, warn io.Writer) ([]target, error) {
	p, err := plan.ReadFile(path)
	if err != nil {
		return nil, outcome.New(outcome.Usage, err, "write a plan with `enginemig plan --out FILE`")
	}
	var out []target
	for _, t := range p.Tables {
		if b := plan.Blockers(t.Findings); len(b) > 0 {
			fmt.Fprintf(warn, "skipping %s.%s: %d blocker(s), first: %s\n", t.Schema, t.Table, len(b), b[0].Message)
			continue
		}
		out = append(out, target{t.Schema, t.Table})
	}
	if len(out) == 0 {
		return nil, outcome.Errorf(outcome.Refused, "plan %s has no table without blockers", path)
	}
	return out, nil
}
