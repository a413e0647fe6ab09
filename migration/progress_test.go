package migration

import (
	"testing"
	"time"

	"github.com/enginemig/enginemig/migration/state"
)

// Each stage shows its own progress: verification counts rows compared, not the copy's rows, and
// done never passes total when the row estimate was low. The whole run's ETA counts verification
// as long as the copy until a sample of it was measured, then at the sample's time per row, and
// counts it down through the index build.
func TestStageProgress(t *testing.T) {
	var c stageClock
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s time.Duration) time.Time { return t0.Add(s * time.Second) }
	p := Progress{Stage: state.StageCopy, RowsCopied: 0, RowsTotal: 1000}
	c.fill(&p, 0, verifyCost{}, t0)
	if p.RunETA != 0 {
		t.Fatalf("run ETA %s before any rate, want 0 (unknown)", p.RunETA)
	}
	p = Progress{Stage: state.StageCopy, RowsCopied: 500, RowsTotal: 1000}
	c.fill(&p, 0, verifyCost{}, at(5))
	if p.StageDone != 500 || p.StageTotal != 1000 || p.StageRate != 100 || p.StageETA != 5*time.Second {
		t.Fatalf("copy: %+v", p)
	}
	if want := 5*time.Second + 10*time.Second; p.RunETA != want { // the rest of the copy, then verification as long as the copy
		t.Fatalf("run ETA %s before the sample, want %s", p.RunETA, want)
	}
	sample := verifyCost{perRow: 20 * time.Millisecond}
	p = Progress{Stage: state.StageCopy, RowsCopied: 600, RowsTotal: 1000}
	c.fill(&p, 0, sample, at(6))
	if want := 4*time.Second + 20*time.Second; p.RunETA != want {
		t.Fatalf("run ETA %s with the sample, want %s", p.RunETA, want)
	}
	p = Progress{Stage: state.StageCopy, RowsCopied: 1200, RowsTotal: 1000} // the estimate was low
	c.fill(&p, 0, sample, at(12))
	if p.StageDone > p.StageTotal {
		t.Fatalf("done %d above total %d", p.StageDone, p.StageTotal)
	}
	p = Progress{Stage: state.StageIndexes, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 0, sample, at(15))
	if want := 24*time.Second - 3*time.Second; p.RunETA != want { // 1200 rows at 20 ms, 3 s into the build
		t.Fatalf("run ETA %s during the index build, want %s", p.RunETA, want)
	}
	p = Progress{Stage: state.StageVerify, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 0, sample, at(16))
	p = Progress{Stage: state.StageVerify, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 600, sample, at(17))
	if p.StageDone != 600 || p.StageTotal != 1200 || p.StageETA != time.Second || p.RunETA != time.Second {
		t.Fatalf("verify: %+v", p)
	}
	p = Progress{Stage: state.StageCutover, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 1200, sample, at(18))
	if p.StageTotal != 0 || p.RunETA != 0 {
		t.Fatalf("cutover: %+v", p)
	}
}
