package migration

import (
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

// estimate keeps plan's estimate for the table (the preflight's checks measured it); none when
// they could not (an empty table, nothing read).
func (m *migrator) estimate(e plan.Estimate) {
	if e.CopySeconds <= 0 {
		m.log.Debug("no copy estimate", "basis", e.Basis)
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
