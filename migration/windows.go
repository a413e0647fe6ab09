package migration

import (
	"context"
	"errors"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/pace/window"
)

// swapInWindow runs the cut-over inside Options.CutoverWindow: it waits for the window to open,
// tries until it closes (cutover.Run's Timeout cut to the time left in it, so it gives up between
// attempts with the original in place) and then waits for the next opening. The overall
// --cutover-timeout counts the time spent trying across windows, not the waits between them. An
// attempt begun just before the close finishes (at most its lock wait and catch-up later).
func (m *migrator) swapInWindow(ctx context.Context, sw cutover.Swap) (cutover.Result, error) {
	w := m.opts.CutoverWindow
	if w == nil {
		return cutover.Run(ctx, m.db, sw, m.pipe, m.opts.Cutover, swapHook{m})
	}
	total, spent := m.opts.Cutover.Timeout, time.Duration(0)
	for {
		if err := m.waitCutoverWindow(ctx, w); err != nil {
			return cutover.Result{}, err
		}
		now := time.Now()
		closes := w.Closes(now)
		if closes.IsZero() {
			continue // closed again in between
		}
		cfg := m.opts.Cutover
		cfg.Timeout = closes.Sub(now)
		windowBound := true
		if total > 0 && total-spent <= cfg.Timeout {
			cfg.Timeout, windowBound = total-spent, false
		}
		start := time.Now()
		cut, err := cutover.Run(ctx, m.db, sw, m.pipe, cfg, swapHook{m})
		spent += time.Since(start)
		// Only a give-up at the window's close waits for the next one: an attempt limit reached
		// inside the window, or the overall timeout, ends the cut-over as without a window.
		if !errors.Is(err, cutover.ErrGaveUp) || ctx.Err() != nil || !windowBound || time.Now().Before(closes) {
			return cut, err
		}
		why, _ := w.Low()
		m.log.Info("cut-over window closed: attempts stopped with the original in place; they go on when it opens again",
			"attempts", cut.Attempts, "last", err.Error(), "window", why)
	}
}

// waitCutoverWindow holds the cut-over while its window is closed. Capture and replay keep the
// shadow current meanwhile (the wait runs under the pipeline, whose failures end it). The control
// socket's release-cutover does not open it: the window is the change ticket's promise, and a
// cut-over wanted now is the same apply again without --cutover-window (it resumes at the swap).
func (m *migrator) waitCutoverWindow(ctx context.Context, w *window.Schedule) error {
	why, closed := w.Low()
	if !closed {
		return nil
	}
	m.log.Info("cut-over held until its window opens; capture keeps the shadow current", "window", why)
	_, endWait := m.ctl.waits.Begin(lockwait.Wait{Kind: lockwait.KindWindow, What: "the cut-over waits: " + why})
	defer endWait()
	err := m.pipe.Do(ctx, func(ctx context.Context) error {
		for !w.Open(time.Now()) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
		return nil
	})
	if err == nil {
		m.log.Info("cut-over window open", "window", w.String(), "closes", w.Closes(time.Now()).Format(time.RFC3339))
	}
	return m.coded(err)
}

// windowedETA maps a copy's remaining work onto wall time: done only while the copy window is
// open, left of it ends at Finish. Verification does not wait for the window.
func windowedETA(w *window.Schedule, now time.Time, left time.Duration) time.Duration {
	if w == nil || left <= 0 {
		return left
	}
	end := w.Finish(now, left)
	if end.IsZero() {
		return left
	}
	return end.Sub(now).Round(time.Second)
}
