package migration

import (
	"context"
	"time"

	"github.com/enginemig/enginemig/plan"
)

// EstimateCheck puts plan's copy estimate, taken when the migration starts (the same measurement
// `enginemig plan` makes), beside what the copy and the index build took, so estimates can be
// judged and recalibrated from real runs.
type EstimateCheck struct {
	EstimatedSeconds float64 `json:"estimated_seconds"`
	// ActualSeconds is this run's copy plus index build (0 until they are done).
	ActualSeconds float64 `json:"actual_seconds"`
	// Ratio is actual over estimated (1 is exact).
	Ratio float64 `json:"actual_over_estimated"`
	Basis string  `json:"basis"`
}

// estimate takes plan's estimate for the table; a failure only leaves it out.
func (m *migrator) estimate(ctx context.Context) {
	e, err := plan.EstimateTable(ctx, m.db, m.ti.Schema, m.ti.Name, 0)
	if err != nil || e.CopySeconds <= 0 {
		m.log.Debug("no copy estimate", "error", err, "basis", e.Basis)
		return
	}
	m.res.Estimate = &EstimateCheck{EstimatedSeconds: e.CopySeconds, Basis: e.Basis}
}

// settleEstimate fills in the actual time once the copy and the index build are done.
func (r *Result) settleEstimate() {
	if r == nil || r.Estimate == nil || r.CopyTime == 0 {
		return
	}
	actual := r.CopyTime + r.IndexTime
	r.Estimate.ActualSeconds = actual.Round(time.Millisecond).Seconds()
	r.Estimate.Ratio = actual.Seconds() / r.Estimate.EstimatedSeconds
}
