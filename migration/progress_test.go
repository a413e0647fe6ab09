package migration

import (
	"testing"
	"time"

	"github.com/enginemig/enginemig/migration/state"
)

// Each stage shows its own progress: verification counts rows compared, not the copy's rows, and
// done never passes total when the row estimate was low.
func TestStageProgress(t *testing.T) {
	var c stageClock
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Progress{Stage: state.StageCopy, RowsCopied: 0, RowsTotal: 1000}
	c.fill(&p, 0, t0)
	p = Progress{Stage: state.StageCopy, RowsCopied: 500, RowsTotal: 1000}
	c.fill(&p, 0, t0.Add(5*time.Second))
	if p.StageDone != 500 || p.StageTotal != 1000 || p.StageRate != 100 || p.StageETA != 5*time.Second {
		t.Fatalf("copy: %+v", p)
	}
	if want := 5*time.Second + 3*time.Second; p.RunETA != want { // the rest of the copy, then verify at a third of its time
		t.Fatalf("run ETA %s, want %s", p.RunETA, want)
	}
	p = Progress{Stage: state.StageCopy, RowsCopied: 1200, RowsTotal: 1000} // the estimate was low
	c.fill(&p, 0, t0.Add(12*time.Second))
	if p.StageDone > p.StageTotal {
		t.Fatalf("done %d above total %d", p.StageDone, p.StageTotal)
	}
	p = Progress{Stage: state.StageVerify, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 0, t0.Add(13*time.Second))
	p = Progress{Stage: state.StageVerify, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 600, t0.Add(14*time.Second))
	if p.StageDone != 600 || p.StageTotal != 1200 || p.StageETA != time.Second || p.RunETA != time.Second {
		t.Fatalf("verify: %+v", p)
	}
	p = Progress{Stage: state.StageCutover, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 1200, t0.Add(15*time.Second))
	if p.StageTotal != 0 || p.RunETA != 0 {
		t.Fatalf("cutover: %+v", p)
	}
}
