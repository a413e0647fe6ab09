package migration

import (
	"context"
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/table"
)

// Gate names, as given to --gate.
const (
	GateBeforeCopy    = "before-copy"
	GateBeforeCutover = "before-cutover"
	GateAfterCutover  = "after-cutover"
)

// ParseGates turns "before-copy,after-cutover" or "all" into a set; "" means none.
func ParseGates(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, g := range strings.Split(s, ",") {
		switch g = strings.TrimSpace(g); g {
		case "":
		case "all":
			out[GateBeforeCopy], out[GateBeforeCutover], out[GateAfterCutover] = true, true, true
		case GateBeforeCopy, GateBeforeCutover, GateAfterCutover:
			out[g] = true
		default:
			return nil, fmt.Errorf("unknown gate %q: use before-copy, before-cutover, after-cutover or all", g)
		}
	}
	return out, nil
}

// gateFailed wraps a failed gate's side-by-side report in the GateFailed exit code.
func gateFailed(g bench.GateResult, what string) error {
	return outcome.New(outcome.GateFailed, fmt.Errorf("%s gate failed: %s\n%s", g.Gate, strings.Join(g.Reasons, "; "), g.String()), what)
}

// sampleGate runs before anything is created: a sample of the table as MyISAM vs InnoDB.
func (m *migrator) sampleGate(ctx context.Context) (*bench.GateResult, error) {
	if !m.opts.Gates[GateBeforeCopy] {
		return nil, nil
	}
	m.opts.Log("before-copy gate: benchmarking a sample as MyISAM and as InnoDB")
	g, err := bench.SampleGate(ctx, m.db, m.ti.Schema, m.ti.Name, m.opts.GateConfig)
	if err != nil {
		return nil, outcome.New(outcome.FailedSafe, err, "")
	}
	m.opts.Log("before-copy gate: %s", passWord(g.Pass))
	if !g.Pass {
		return &g, gateFailed(g, "InnoDB did not meet the thresholds on a sample of this table; nothing was changed")
	}
	return &g, nil
}

// shadowGate compares source and finished shadow with read-only probes.
func (m *migrator) shadowGate(ctx context.Context) (*bench.GateResult, error) {
	if !m.opts.Gates[GateBeforeCutover] {
		return nil, nil
	}
	m.opts.Log("before-cutover gate: read-only probes on %s vs %s", m.ti.Name, table.ShadowName(m.ti.Name))
	g, err := bench.CompareReadOnly(ctx, m.db, m.ti.Schema, m.ti.Name, table.ShadowName(m.ti.Name), m.opts.GateConfig)
	if err != nil {
		return nil, outcome.New(outcome.FailedSafe, err, "")
	}
	m.opts.Log("before-cutover gate: %s", passWord(g.Pass))
	if !g.Pass {
		return &g, gateFailed(g, "the shadow was dropped; the original table is unchanged")
	}
	return &g, nil
}

func passWord(ok bool) string {
	if ok {
		return "passed"
	}
	return "FAILED"
}
