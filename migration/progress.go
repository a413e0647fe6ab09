package migration

import (
	"time"

	"github.com/enginemig/enginemig/migration/state"
)

// verifyShare is verification's time as a share of the copy's, for the whole-run ETA (measured:
// docs/bench/constants.md, "Measurements behind the code's constants").
const verifyShare = 1.0 / 3

// stageClock turns the counters into each stage's own progress, rate and ETA.
type stageClock struct {
	stage    state.Stage
	since    time.Time
	doneAt0  int64
	copyRate float64 // rows/s of the copy, kept for the whole-run ETA
}

func (c *stageClock) fill(p *Progress, verified int64, now time.Time) {
	var done int64
	switch p.Stage {
	case state.StageCopy:
		done = p.RowsCopied
	case state.StageVerify:
		done = verified
	}
	if p.Stage != c.stage {
		c.stage, c.since, c.doneAt0 = p.Stage, now, done
	}
	total := max(p.RowsTotal, p.RowsCopied, done)
	if p.Stage != state.StageCopy && p.Stage != state.StageVerify {
		total = 0
	}
	p.StageDone, p.StageTotal = done, total
	if secs := now.Sub(c.since).Seconds(); secs > 0 && done > c.doneAt0 {
		p.StageRate = float64(done-c.doneAt0) / secs
		p.StageETA = time.Duration(float64(total-done) / p.StageRate * float64(time.Second)).Round(time.Second)
		if p.Stage == state.StageCopy {
			c.copyRate = p.StageRate
		}
	}
	p.RunETA = c.runETA(p)
}

// runETA: during the copy, the rest of it plus verification estimated from the copy's rate;
// during verification, the rest of it; 0 after.
func (c *stageClock) runETA(p *Progress) time.Duration {
	switch {
	case p.Stage == state.StageCopy && c.copyRate > 0:
		verify := time.Duration(verifyShare * float64(p.StageTotal) / c.copyRate * float64(time.Second))
		return p.StageETA + verify.Round(time.Second)
	case p.Stage == state.StageVerify:
		return p.StageETA
	}
	return 0
}
