package migration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/pace/throttle"
	"github.com/enginemig/enginemig/shadow"
)

// errAborted is the cause given when an operator aborts through the control socket.
var errAborted = errors.New("aborted by the operator")

// controller adapts a running migration to control.Handler. It outlives the attempts of one Run
// (a resume after a lost connection is a new migrator), so it holds the current one.
type controller struct {
	log      *slog.Logger
	abort    context.CancelCauseFunc
	mu       sync.Mutex
	m        *migrator
	thr      *throttle.Throttler
	release  chan struct{}
	isClosed bool
	waits    *lockwait.Watcher // what the migration waits on (set once by Run)

	// The throttle's wait while it lasts (watchThrottle, on the watcher's goroutine only).
	throttleUpdate func(string, []lockwait.Session)
	throttleEnd    func()

	cutAttempts atomic.Int64 // cut-over attempts so far
	cutLockHeld atomic.Int64 // nanoseconds the successful attempt held the table locked

	// The server's capture position as status last read it. Status is polled (a dashboard, a
	// script, applybench several times a second) and each read is a query on the server the
	// application needs; once a second is enough for how far the capture trails.
	posMu sync.Mutex
	pos   shadow.Position
	posAt time.Time
}

// serverPosition is the server's capture position, read at most once a second.
func (c *controller) serverPosition(m *migrator, st state.State) shadow.Position {
	c.posMu.Lock()
	defer c.posMu.Unlock()
	if time.Since(c.posAt) < time.Second {
		return c.pos
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.pos, c.posAt = state.ServerPosition(ctx, m.db, st), time.Now()
	return c.pos
}

func newController(log *slog.Logger, abort context.CancelCauseFunc) *controller {
	return &controller{log: log, abort: abort, release: make(chan struct{})}
}

func (c *controller) attach(m *migrator) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.thr = m, nil
}

func (c *controller) setThrottle(t *throttle.Throttler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.thr = t
}

func (c *controller) current() (*migrator, *throttle.Throttler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m, c.thr
}

func (c *controller) released() <-chan struct{} { return c.release }

func (c *controller) Pause() {
	if _, t := c.current(); t != nil {
		t.SetPaused(true)
	}
	c.log.Info("copy paused by the operator")
}

func (c *controller) Resume() {
	if _, t := c.current(); t != nil {
		t.SetPaused(false)
	}
	c.log.Info("copy resumed by the operator")
}

// Abort stops the migration cleanly (the shadow is dropped, the original stays). Once the
// cut-over has started it is ignored: a half-done abort there would be worse than finishing.
func (c *controller) Abort() {
	if m, _ := c.current(); m != nil && m.liveRecord() != nil && m.liveRecord().snapshot().Stage == state.StageCutover {
		c.log.Warn("abort ignored: the cut-over has started")
		return
	}
	c.log.Warn("aborting on the operator's request")
	c.abort(errAborted)
}

// ReleaseCutover lets a postponed cut-over proceed.
func (c *controller) ReleaseCutover() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.isClosed {
		close(c.release)
		c.isClosed = true
		c.log.Info("cut-over released by the operator")
	}
}

func (c *controller) SetChunkTime(d time.Duration) error {
	m, _ := c.current()
	if m == nil || m.livePipeline() == nil || !m.livePipeline().SetChunkTime(d) {
		return errors.New("the copy has not started")
	}
	c.log.Info("chunk time set by the operator", "chunk_time", d)
	return nil
}

func (c *controller) SetMaxLag(d time.Duration) error {
	m, t := c.current()
	if m == nil || len(m.opts.Replicas) == 0 {
		return errors.New("no --replica is watched, so a lag limit has no effect")
	}
	if t != nil {
		t.SetMaxLag(d)
	}
	return nil
}

func (c *controller) SetMaxThreadsRunning(n int) error {
	if _, t := c.current(); t != nil {
		t.SetMaxThreadsRunning(n)
		return nil
	}
	return errors.New("the copy is not running")
}

// Status is what `enginemig control status` prints: the recorded state with the live counters of
// the copy, replay and throttle.
func (c *controller) Status() control.Status {
	m, thr := c.current()
	var out control.Status
	if m == nil || m.liveRecord() == nil {
		out = control.Status{Stage: state.StagePreflight.String()}
		if c.waits != nil {
			out.Schema, out.Table = c.waits.Table().Schema, c.waits.Table().Name
		}
	} else {
		out = c.recorded(m)
	}
	if c.waits != nil {
		out.Waiting, out.LockWaits = c.waits.Snapshot(), c.waits.Seen()
	}
	if thr != nil {
		ts := thr.Status()
		out.Throttle = &ts
	}
	if m != nil {
		if d := m.disk.Load(); d != nil {
			ds := d.Status()
			out.Disk = &ds
		}
		if g := m.gentle.Load(); g != nil {
			ps := g.State()
			out.Pace = &ps
		}
	}
	return out
}

// recorded is the state table's view of the running migration with the live counters. The
// capture's lag in bytes compares its live position with the server's (one query per call: calls
// come from control status and metrics scrapes, not from a loop).
func (c *controller) recorded(m *migrator) control.Status {
	rec, pipe := m.liveRecord(), m.livePipeline()
	st := rec.snapshot()
	var pr shadow.Progress
	var server shadow.Position
	if pipe != nil {
		pr = pipe.Progress()
		if a := pr.Capture.Position; a != "" {
			st.CaptureResume = a
		}
		server = c.serverPosition(m, st)
	}
	out := state.StatusOf(st, server, time.Now())
	out.Elapsed = time.Since(m.start)
	out.CutoverAttempts, out.CutoverLockHeld = int(c.cutAttempts.Load()), time.Duration(c.cutLockHeld.Load())
	if pipe != nil {
		out.RowsCopied, out.ChunkSize = pr.RowsCopied, pr.ChunkSize
		rs := pr.Capture
		out.CaptureChanges, out.CaptureAppliedOps, out.CapturePosition, out.CaptureCatchingUp = rs.Changes, rs.Applied, string(rs.Position), rs.Behind
		out.CaptureLagSeconds = rs.LagSeconds
		out.RowsVerified = pr.RowsVerified
		if last := rec.last.Load(); last != nil {
			out.StageRate, out.StageETA, out.RunETA = last.StageRate, last.StageETA, last.RunETA
		}
	}
	return out
}

// cutoverObserver shows the cut-over's waits and attempts in status and metrics.
type cutoverObserver struct{ c *controller }

func (o cutoverObserver) Waiting(w lockwait.Wait) (func(string, []lockwait.Session), func()) {
	return o.c.waits.Begin(w)
}

func (o cutoverObserver) Attempted(n int, held time.Duration, err error) {
	o.c.cutAttempts.Store(int64(n))
	if err == nil {
		o.c.cutLockHeld.Store(int64(held))
	}
	if errors.Is(err, cutover.ErrLockNotGranted) {
		o.c.waits.CountLockWait()
	}
}

var _ control.Handler = (*controller)(nil)

// listenControl opens the control socket when one is configured.
func listenControl(ctx context.Context, opts Options, c *controller) (func(), error) {
	if opts.ControlSocket == "" {
		return func() {}, nil
	}
	srv, err := control.Listen(ctx, opts.ControlSocket, c)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	opts.Logger.Info("control socket open: enginemig control --socket PATH status|pause|resume|abort|release-cutover|chunk-time=...", "socket", opts.ControlSocket)
	return func() { srv.Close() }, nil
}
