package migration

import (
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/window"
)

// stageClock turns the counters into each stage's own progress, rate and ETA, and the whole run's
// ETA (runETA).
type stageClock struct {
	stage   state.Stage
	since   time.Time
	doneAt0 int64
	// verifyLeft is verification's estimate when the copy last reported, at copyEnd: during the
	// index build the estimate counts down from there.
	verifyLeft time.Duration
	copyEnd    time.Time
	// walks are the copy walk's counts over the last restWindow, for the rests the pace asks for
	// now (restRatio).
	walks []walkAt
	// window is the copy window (nil: none): the copy's rate counts only its open time, and what
	// is left of the copy ends where that much open time has passed (windowedETA).
	window *window.Schedule
}

type walkAt struct {
	at         time.Time
	held, rest time.Duration
}

// restWindow is how far back restRatio looks: long enough for tens of chunks at the pace's lowest
// level (a chunk and its rest about 200 ms at 75 % load), short enough to follow the pace.
const restWindow = 20 * time.Second

// restRatio is what the copy's walk rested over the last restWindow, against the time it held
// the source: the pace's rests now, which verification's chunks will be given too.
func (c *stageClock) restRatio(w copier.WalkStats, now time.Time) float64 {
	c.walks = append(c.walks, walkAt{now, w.Held, w.Rest})
	for len(c.walks) > 2 && now.Sub(c.walks[1].at) >= restWindow {
		c.walks = c.walks[1:]
	}
	first := c.walks[0]
	if held := w.Held - first.held; held > 0 {
		return float64(w.Rest-first.rest) / float64(held)
	}
	return 0
}

func (c *stageClock) fill(p *Progress, verified int64, walk copier.WalkStats, cost verifyCost, now time.Time) {
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
	ran := now.Sub(c.since)
	if p.Stage == state.StageCopy && c.window != nil {
		ran = c.window.OpenBetween(c.since, now)
	}
	if secs := ran.Seconds(); secs > 0 && done > c.doneAt0 {
		p.StageRate = float64(done-c.doneAt0) / secs
		p.StageETA = seconds(float64(total-done) / p.StageRate)
		if p.Stage == state.StageCopy {
			p.StageETA = windowedETA(c.window, now, p.StageETA)
		}
	}
	ratio := 0.0
	if p.Stage == state.StageCopy {
		ratio = c.restRatio(walk, now)
	}
	p.RunETA = c.runETA(p, cost, ratio, now)
}

// runETA is what is left of the run's copy and verification: each stage still to come counted at
// its own measured cost. During the copy: the rest of it, plus verification for every row at what
// a row cost a sample of it (sample.go) with the rests the pace gives the copy now; before the
// sample, verification as long as the copy (0.76 to 1.5 times it, measured at 25 to 75 % load). During the index build (beside which
// binlog capture verifies), that estimate less the time since the copy ended. During verification,
// the rest of it at its own rate. With a copy window the copy's part is wall time, its pauses
// outside the window counted (fill). The cut-over's own wait (a postponed one, its window, its
// retries) is not counted: it depends on the application's transactions and the ticket, not on
// the table. 0 after verification.
func (c *stageClock) runETA(p *Progress, cost verifyCost, restRatio float64, now time.Time) time.Duration {
	switch p.Stage {
	case state.StageCopy:
		if p.StageRate <= 0 {
			return 0
		}
		rows := float64(max(p.RowsTotal, p.RowsCopied))
		c.copyEnd = now
		c.verifyLeft = seconds(rows / p.StageRate)
		if cost != (verifyCost{}) {
			c.verifyLeft = cost.left(rows, restRatio)
		}
		return p.StageETA + c.verifyLeft
	case state.StageIndexes:
		return max(c.verifyLeft-now.Sub(c.copyEnd), 0).Round(time.Second)
	case state.StageVerify:
		return p.StageETA
	}
	return 0
}

// seconds is s seconds, to the second.
func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}
