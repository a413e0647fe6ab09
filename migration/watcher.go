package migration

import (
	"context"
	"database/sql"
	"time"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/pace/throttle"
)

// watchConfig is what a run on opts' table watches (lockwait.Watcher): its statements on the
// table and the tables it creates beside it.
func watchConfig(db *sql.DB, opts Options, abort context.CancelCauseFunc) lockwait.WatchConfig {
	return lockwait.WatchConfig{DB: db, Own: opts.Conn.IsOwn(), Tables: lockwait.TablesOf(opts.Schema, table.RunNames(opts.Table)), Logger: opts.Logger, Timeout: opts.LockTimeout, Abort: abort,
		Unchanged: "nothing was changed: the original table is in place and any shadow was dropped"}
}

// watchThrottle reports the copy's throttle as a wait while it holds the copy back (it runs on
// the waits goroutine only).
func (c *controller) watchThrottle(time.Time) {
	m, thr := c.current()
	if thr != nil {
		if err := thr.Stopped(); err != nil {
			c.abort(err) // at any stage: a replica that applies nothing is no lag to wait out (stopped)
		}
	}
	var ts throttle.Status
	if thr != nil && m != nil && m.liveRecord() != nil && m.liveRecord().snapshot().Stage == state.StageCopy {
		ts = thr.Status()
	}
	switch {
	case ts.Throttled && c.throttleEnd == nil:
		c.throttleUpdate, c.throttleEnd = c.waits.Begin(lockwait.Wait{Kind: lockwait.KindThrottle, What: ts.Reason, Since: ts.Since})
	case ts.Throttled:
		c.throttleUpdate(ts.Reason, nil)
	case c.throttleEnd != nil:
		c.throttleEnd()
		c.throttleUpdate, c.throttleEnd = nil, nil
	}
}

// postponedUntil says what releases a postponed cut-over.
func postponedUntil(o Options) string {
	what := "removal of " + o.PostponeFile + " (or `enginemig control release-cutover`)"
	if !o.PostponeUntil.IsZero() {
		what += ", at the latest " + o.PostponeUntil.Format(time.RFC3339)
	}
	return what
}

// beforeSwap reports whether the migration has not reached its cut-over yet (the lock timeout's
// promise, nothing changed, holds only until then).
func (c *controller) beforeSwap() bool {
	m, _ := c.current()
	if m == nil || m.liveRecord() == nil {
		return true
	}
	rec := m.liveRecord()
	switch rec.snapshot().Stage {
	case state.StageCutover, state.StageTriggers, state.StageDone:
		return false
	}
	return true
}

// diskShort says why the server's disk is short or full, "" when it is not or is not watched.
func (c *controller) diskShort() string {
	m, _ := c.current()
	if m == nil {
		return ""
	}
	why, _ := m.disk.Load().Low()
	return why
}
