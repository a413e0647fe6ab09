package migration

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/diskspace"
	"github.com/enginemig/enginemig/pace/lockwait"
)

// watchDisk starts the watch of the server's free disk space (diskspace.Watch) for the rest of the
// run: the copy waits while it is under the reserve (the throttle's reason disk), the index build
// waits before it starts, and a run under the reserve longer than the pause limit, or that finds
// the disk full, is ended (diskStop). Without a way to read free space it says so and goes on:
// the full-disk errors are still recognised. A run that starts under the reserve is refused before
// it writes anything.
func (m *migrator) watchDisk(ctx context.Context) error {
	if m.opts.DiskReserve == nil {
		return nil // the watch is off (Options.DiskReserve)
	}
	src, why := diskspace.Detect(ctx, m.db)
	if src == nil {
		m.log.Warn("disk: free space is not watched; the copy will not pause for it (a full disk is still recognised)", "why", why)
		return nil
	}
	w := diskspace.NewWatch(diskspace.Config{Source: src, Reserve: *m.opts.DiskReserve, PauseLimit: m.opts.DiskPauseLimit,
		DB: m.db, Logger: m.log, GiveUp: m.giveUpOnDisk})
	m.onExit(w.Start(ctx))
	st := w.Status()
	m.log.Info("disk: watching free space", "source", st.Source, "reserve", st.Reserve, "file_systems", len(st.FS), "gives_up_after", m.opts.DiskPauseLimit)
	if why, low := w.Low(); low && m.pipe == nil && m.resume == nil {
		return &keepShadow{outcome.New(outcome.Refused, fmt.Errorf("%s: under the reserve before the copy starts; nothing was created", why),
			"free space on that file system, or lower --disk-reserve, and run apply again")}
	}
	m.disk.Store(w)
	return nil
}

// diskWaiter holds the copy back while the disk is short, for a copy that waits on a throttle
// shared with other migrations (which does not watch this run's disk).
type diskWaiter struct {
	copier.Waiter
	w *diskspace.Watch
}

func (d diskWaiter) Wait(ctx context.Context) error {
	if err := d.Waiter.Wait(ctx); err != nil {
		return err
	}
	return d.w.WaitRoom(ctx)
}

// waitDiskRoom holds a step that writes much at once (the index build) while the disk is under
// the reserve, shown as a wait of kind disk.
func (m *migrator) waitDiskRoom(ctx context.Context) error {
	w := m.disk.Load()
	why, low := w.Low()
	if !low {
		return nil
	}
	update, end := m.ctl.waits.Begin(lockwait.Wait{Kind: lockwait.KindDisk, What: why})
	defer end()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if why, low := w.Low(); low {
				update(why, nil)
			}
		}
	}()
	return w.WaitRoom(ctx)
}

// diskStopped recognises a run ended for want of disk space (the watch gave up, or the server
// said its disk is full) and ends it as the DBA chose (Options.DiskKeep): the shadow dropped,
// exit 6, or kept for a resume, exit 7. ok is false for any other failure.
func (m *migrator) diskStopped(ctx context.Context, err error) (error, bool) {
	var k *keepShadow
	var p *pending
	if errors.As(err, &k) || errors.As(err, &p) {
		return nil, false // a failure that must keep the shadow (the tables' state unclear) stays so
	}
	why, full := diskspace.IsFull(err)
	var de *diskspace.Error
	if errors.As(context.Cause(ctx), &de) {
		why, full = de.Error(), de.Full
	} else if !full {
		return nil, false
	}
	if full {
		m.log.Error("disk full: enginemig stops writing", "why", why)
	}
	if m.opts.DiskKeep {
		if m.pipe != nil {
			m.pipe.Stop()
		}
		bg := context.WithoutCancel(ctx)
		m.rec.update(bg, func(st *state.State) { st.Error = "disk: " + why })
		m.hook(bg, PointFailure)
		remedy := "the shadow table and the progress are kept (--disk-give-up=keep): free space, then run the same apply again to resume; or `enginemig cleanup` to drop the shadow and free its space now"
		if full {
			remedy = "the application's writes wait until space is freed: " + remedy
		}
		return outcome.New(outcome.NeedsAttention, fmt.Errorf("stopped for want of disk space: %s", why), remedy), true
	}
	err = m.fail(ctx, outcome.New(outcome.FailedSafe, fmt.Errorf("stopped for want of disk space: %s; the shadow table was dropped to give its space back (--disk-give-up=drop) and the original is unchanged", why),
		"free space (or lower --disk-reserve) and run apply again"), true)
	return err, true
}

// giveUpOnDisk ends the run for want of disk space, unless its cut-over has begun: ending that
// half-way would be worse than finishing it (as for an operator's abort).
func (m *migrator) giveUpOnDisk(e *diskspace.Error) {
	if rec := m.liveRecord(); rec != nil && rec.snapshot().Stage == state.StageCutover {
		m.log.Warn("disk: not stopping: the cut-over has started", "why", e.Error())
		return
	}
	m.ctl.abort(e)
}
