package migration

import (
	"testing"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/migration/state"
)

// Each stage shows its own progress: verification counts rows compared, not the copy's rows, and
// done never passes total when the row estimate was low. The whole run's ETA counts verification
// as long as the copy until a sample of it was measured, then at what a row cost the sample with
// the rests the pace gives the copy now, and counts it down through the index build.
func TestStageProgress(t *testing.T) {
	var c stageClock
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s time.Duration) time.Time { return t0.Add(s * time.Second) }
	p := Progress{Stage: state.StageCopy, RowsCopied: 0, RowsTotal: 1000}
	c.fill(&p, 0, copier.WalkStats{}, verifyCost{}, t0)
	if p.RunETA != 0 {
		t.Fatalf("run ETA %s before any rate, want 0 (unknown)", p.RunETA)
	}
	p = Progress{Stage: state.StageCopy, RowsCopied: 500, RowsTotal: 1000}
	c.fill(&p, 0, copier.WalkStats{Held: time.Second}, verifyCost{}, at(5))
	if p.StageDone != 500 || p.StageTotal != 1000 || p.StageRate != 100 || p.StageETA != 5*time.Second {
		t.Fatalf("copy: %+v", p)
	}
	if want := 5*time.Second + 10*time.Second; p.RunETA != want { // the rest of the copy, then verification as long as the copy
		t.Fatalf("run ETA %s before the sample, want %s", p.RunETA, want)
	}
	// A row cost the sample 1 ms for its lock, 2 ms under it, 5 ms on the shadow; the copy has
	// rested 4 times its locks since it began.
	sample := verifyCost{lockWait: time.Millisecond, held: 2 * time.Millisecond, after: 5 * time.Millisecond}
	p = Progress{Stage: state.StageCopy, RowsCopied: 600, RowsTotal: 1000}
	c.fill(&p, 0, copier.WalkStats{Held: 1500 * time.Millisecond, Rest: 6 * time.Second}, sample, at(6))
	if want := 4*time.Second + 11*time.Second; p.RunETA != want { // 1000 rows at 1 + 2 + max(5, 4 x 2) ms
		t.Fatalf("run ETA %s with the sample, want %s", p.RunETA, want)
	}
	p = Progress{Stage: state.StageCopy, RowsCopied: 1200, RowsTotal: 1000} // the estimate was low
	c.fill(&p, 0, copier.WalkStats{Held: 2 * time.Second, Rest: 8 * time.Second}, sample, at(12))
	if p.StageDone > p.StageTotal {
		t.Fatalf("done %d above total %d", p.StageDone, p.StageTotal)
	}
	p = Progress{Stage: state.StageIndexes, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 0, copier.WalkStats{}, sample, at(15))
	if want := 13*time.Second - 3*time.Second; p.RunETA != want { // 1200 rows at 11 ms, 3 s into the build
		t.Fatalf("run ETA %s during the index build, want %s", p.RunETA, want)
	}
	p = Progress{Stage: state.StageVerify, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 0, copier.WalkStats{}, sample, at(16))
	p = Progress{Stage: state.StageVerify, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 600, copier.WalkStats{}, sample, at(17))
	if p.StageDone != 600 || p.StageTotal != 1200 || p.StageETA != time.Second || p.RunETA != time.Second {
		t.Fatalf("verify: %+v", p)
	}
	p = Progress{Stage: state.StageCutover, RowsCopied: 1200, RowsTotal: 1000}
	c.fill(&p, 1200, copier.WalkStats{}, sample, at(18))
	if p.StageTotal != 0 || p.RunETA != 0 {
		t.Fatalf("cutover: %+v", p)
	}
}
