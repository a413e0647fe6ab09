package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/state"
)

// progressDisplay shows a progress bar on a terminal, plain periodic lines otherwise.
type progressDisplay struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	label    string
	lastLine time.Time
}

func newProgressDisplay(w io.Writer, allowBar bool, label string) *progressDisplay {
	d := &progressDisplay{w: w, label: label}
	if f, ok := w.(*os.File); ok && allowBar && term.IsTerminal(int(f.Fd())) {
		d.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(label+" copy"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish())
	}
	return d
}

func (d *progressDisplay) update(p migration.Progress) {
	lag := "replay caught up"
	if p.CaptureCatchingUp {
		lag = "replay catching up"
	}
	unit := map[state.Stage]string{state.StageCopy: "rows copied", state.StageVerify: "rows verified"}[p.Stage]
	if d.bar != nil {
		if p.StageTotal > 0 && d.bar.GetMax64() != p.StageTotal {
			d.bar.ChangeMax64(p.StageTotal)
		}
		desc := fmt.Sprintf("%s %s (chunk %d, %d changes, %s)", d.label, p.Stage, p.ChunkSize, p.CaptureChanges, lag)
		if p.Waiting != "" {
			desc = fmt.Sprintf("%s %s waiting (%s)", d.label, p.Stage, p.Waiting)
		}
		d.bar.Describe(desc)
		d.bar.Set64(p.StageDone)
		return
	}
	if time.Since(d.lastLine) < 10*time.Second {
		return
	}
	d.lastLine = time.Now()
	if p.Waiting != "" {
		lag += "; waiting: " + p.Waiting
	}
	if unit == "" {
		fmt.Fprintf(d.w, "%s %s %s: %d changes replayed, %s\n", time.Now().Format("15:04:05"), d.label, p.Stage, p.CaptureChanges, lag)
		return
	}
	pct := 0.0
	if p.StageTotal > 0 {
		pct = 100 * float64(p.StageDone) / float64(p.StageTotal)
	}
	// Before the stage has a rate (its first line), an ETA of 0s would read as "about to end".
	eta, runETA := "unknown", "unknown"
	if p.StageRate > 0 {
		eta, runETA = p.StageETA.String(), p.RunETA.String()
	}
	fmt.Fprintf(d.w, "%s %s %s: %d/%d %s (%.1f%%), %.0f rows/s, ETA %s (whole run %s), %d changes replayed, %s\n",
		time.Now().Format("15:04:05"), d.label, p.Stage, p.StageDone, p.StageTotal, unit, pct, p.StageRate,
		eta, runETA, p.CaptureChanges, lag)
}

// clear takes the bar off the screen so a log record can be written; the next update redraws it.
func (d *progressDisplay) clear() {
	if d.bar != nil {
		d.bar.Clear()
	}
}

func (d *progressDisplay) finish() {
	if d.bar != nil {
		d.bar.Finish()
	}
}
