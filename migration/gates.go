package migration

import (
	"context"
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/rollback"
)

// gateFailed wraps a failed gate's side-by-side report in the GateFailed exit code.
func gateFailed(g bench.GateResult, what string) error {
	return outcome.New(outcome.GateFailed, fmt.Errorf("%s gate failed: %s\n%s", g.Gate, strings.Join(g.Reasons, "; "), g.String()), what)
}

// sampleGate runs before anything is created: a sample of the table as MyISAM vs InnoDB.
func (m *migrator) sampleGate(ctx context.Context) error {
	if !m.opts.Gates[GateBeforeCopy] {
		return nil
	}
	m.log.Info("before-copy gate: benchmarking a sample as MyISAM and as InnoDB")
	g, err := bench.SampleGate(ctx, m.db, m.ti.Schema, m.ti.Name, m.opts.GateConfig)
	if err != nil {
		return outcome.New(outcome.FailedSafe, err, "")
	}
	m.res.Gates = append(m.res.Gates, g)
	m.log.Info("before-copy gate: " + g.Verdict())
	if !g.Pass {
		return gateFailed(g, "InnoDB did not meet the thresholds on a sample of this table; nothing was changed")
	}
	return nil
}

// shadowGate compares source and finished shadow with read-only probes.
func (m *migrator) shadowGate(ctx context.Context) error {
	if !m.opts.Gates[GateBeforeCutover] {
		return nil
	}
	m.log.Info("before-cutover gate: read-only probes on source vs shadow", "source", m.ti.Name, "shadow", table.ShadowName(m.ti.Name))
	g, err := bench.CompareReadOnly(ctx, m.db, m.ti.Schema, m.ti.Name, table.ShadowName(m.ti.Name), m.opts.GateConfig)
	if err != nil {
		return outcome.New(outcome.FailedSafe, err, "")
	}
	m.res.Gates = append(m.res.Gates, g)
	m.log.Info("before-cutover gate: " + g.Verdict())
	if !g.Pass {
		return gateFailed(g, "the shadow was dropped; the original table is unchanged")
	}
	return nil
}

// probeBeforeCutover takes the after-cutover gate's baseline: read-only probes on the original
// just before the swap (nil when the gate is off).
func (m *migrator) probeBeforeCutover(ctx context.Context) (*bench.Result, error) {
	if !m.opts.Gates[GateAfterCutover] {
		return nil, nil
	}
	m.log.Info("after-cutover gate: read-only probes before the swap", "table", m.ti.Name)
	r, err := bench.ProbeReadOnly(ctx, m.db, m.ti.Schema, m.ti.Name, m.opts.GateConfig)
	if err != nil {
		return nil, outcome.New(outcome.FailedSafe, err, "")
	}
	return &r, nil
}

// afterCutoverGate probes the converted table and compares it with the probe taken just before
// the swap; a regression past the thresholds rolls back, keeping every write since the cut-over.
// Its failure is settled: the run ends with the result and the error.
func (m *migrator) afterCutoverGate(ctx context.Context) error {
	if err := m.judgeAfterCutover(ctx, m.res, *m.probe); err != nil {
		return &settled{err}
	}
	return nil
}

func (m *migrator) judgeAfterCutover(ctx context.Context, res *Result, before bench.Result) error {
	m.log.Info("after-cutover gate: read-only probes on the converted table")
	after, err := bench.ProbeReadOnly(ctx, m.db, m.ti.Schema, m.ti.Name, m.opts.GateConfig)
	if err != nil {
		return outcome.New(outcome.NeedsAttention, fmt.Errorf("after-cutover gate could not measure: %w", err),
			"the conversion is done; judge performance by hand")
	}
	g := m.opts.GateConfig.Thresholds.Judge(before, after)
	g.Gate = GateAfterCutover.String()
	res.Gates = append(res.Gates, g)
	m.log.Info("after-cutover gate: " + g.Verdict())
	if g.Pass {
		return nil
	}
	m.hook(ctx, PointFailure)
	m.log.Warn("after-cutover gate failed: rolling back to the MyISAM table, keeping the writes made since the cut-over")
	rb, rerr := rollback.Run(context.WithoutCancel(ctx), m.db, rollback.Options{Conn: m.opts.Conn, Schema: m.ti.Schema, Table: m.ti.Name,
		StateSchema: m.opts.StateSchema, Cutover: m.opts.Cutover, Logger: m.log})
	m.hook(ctx, PointRollback)
	if rerr != nil {
		return outcome.New(outcome.NeedsAttention, fmt.Errorf("after-cutover gate failed and the rollback failed: %w\n%s", rerr, g.String()),
			"the InnoDB table is live; run `enginemig rollback` once the cause is fixed")
	}
	return gateFailed(g, fmt.Sprintf("rolled back: %s is MyISAM again with every write made since the cut-over (%d changes replayed); the InnoDB table is kept as %s",
		m.ti.QuotedName(), rb.CaptureChanges, dbconn.QualifiedName(m.ti.Schema, rb.InnoDBTable)))
}
