package migration

import (
	"context"
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/dbconn"
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

// afterCutoverGate probes the converted table and compares it with the probe taken just before
// the swap; a regression past the thresholds rolls back, keeping every write since the cut-over.
func (m *migrator) afterCutoverGate(ctx context.Context, res *Result, before bench.Result) error {
	m.opts.Log("after-cutover gate: read-only probes on the converted table")
	after, err := bench.ProbeReadOnly(ctx, m.db, m.ti.Schema, m.ti.Name, m.opts.GateConfig)
	if err != nil {
		return outcome.New(outcome.NeedsAttention, fmt.Errorf("after-cutover gate could not measure: %w", err),
			"the conversion is done; judge performance by hand")
	}
	g := m.opts.GateConfig.Thresholds.Judge(before, after)
	g.Gate = GateAfterCutover
	res.Gates = append(res.Gates, g)
	m.opts.Log("after-cutover gate: %s", passWord(g.Pass))
	if g.Pass {
		return nil
	}
	m.hook(ctx, "failure")
	m.opts.Log("after-cutover gate failed: rolling back to the MyISAM table, keeping the writes made since the cut-over")
	rb, rerr := Rollback(context.WithoutCancel(ctx), m.db, RollbackOptions{Conn: m.opts.Conn, Schema: m.ti.Schema, Table: m.ti.Name,
		StateSchema: m.opts.StateSchema, Cutover: m.opts.Cutover, Log: m.opts.Log})
	m.hook(ctx, "rollback")
	if rerr != nil {
		return outcome.New(outcome.NeedsAttention, fmt.Errorf("after-cutover gate failed and the rollback failed: %w\n%s", rerr, g.String()),
			"the InnoDB table is live; run `enginemig rollback` once the cause is fixed")
	}
	return gateFailed(g, fmt.Sprintf("rolled back: %s is MyISAM again with every write made since the cut-over (%d changes replayed); the InnoDB table is kept as %s",
		m.ti.QuotedName(), rb.ReplayEvents, dbconn.QualifiedName(m.ti.Schema, rb.InnoDBTable)))
}
