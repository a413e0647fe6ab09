package migration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/enginemig/enginemig/control"
	"github.com/enginemig/enginemig/throttle"
)

// errAborted is the cause given when an operator aborts through the control socket.
var errAborted = errors.New("aborted by the operator")

// controller adapts a running migration to control.Handler.
type controller struct {
	m        *migrator
	abort    context.CancelCauseFunc
	mu       sync.Mutex
	release  chan struct{}
	released bool
}

func newController(m *migrator, abort context.CancelCauseFunc) *controller {
	return &controller{m: m, abort: abort, release: make(chan struct{})}
}

func (c *controller) throttler() *throttle.Throttler {
	c.m.stageMu.Lock()
	defer c.m.stageMu.Unlock()
	return c.m.thr
}

func (c *controller) Pause() {
	if t := c.throttler(); t != nil {
		t.SetPaused(true)
	}
	c.m.opts.Log("copy paused by the operator")
}

func (c *controller) Resume() {
	if t := c.throttler(); t != nil {
		t.SetPaused(false)
	}
	c.m.opts.Log("copy resumed by the operator")
}

// Abort stops the migration cleanly (the shadow is dropped, the original stays). Once the
// cut-over has started it is ignored: a half-done abort there would be worse than finishing.
func (c *controller) Abort() {
	c.m.stageMu.Lock()
	stage := c.m.stage
	c.m.stageMu.Unlock()
	if stage == StageCutover {
		c.m.opts.Log("abort ignored: the cut-over has started")
		return
	}
	c.m.opts.Log("aborting on the operator's request")
	c.abort(errAborted)
}

// ReleaseCutover lets a postponed cut-over proceed.
func (c *controller) ReleaseCutover() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.released {
		close(c.release)
		c.released = true
		c.m.opts.Log("cut-over released by the operator")
	}
}

func (c *controller) SetChunkTime(d time.Duration) error {
	c.m.stageMu.Lock()
	cp := c.m.copy
	c.m.stageMu.Unlock()
	if cp == nil {
		return errors.New("the copy has not started")
	}
	cp.SetChunkTime(d)
	c.m.opts.Log("chunk time set to %s", d)
	return nil
}

func (c *controller) SetMaxLag(d time.Duration) error {
	if len(c.m.opts.Replicas) == 0 {
		return errors.New("no --replica is watched, so a lag limit has no effect")
	}
	if t := c.throttler(); t != nil {
		t.SetMaxLag(d)
	}
	return nil
}

func (c *controller) SetMaxThreadsRunning(n int) error {
	if t := c.throttler(); t != nil {
		t.SetMaxThreadsRunning(n)
		return nil
	}
	return errors.New("the copy is not running")
}

// Status is what `enginemig control status` prints: the recorded state with the live counters of
// the copy, replay and throttle.
func (c *controller) Status() control.Status {
	m := c.m
	m.stageMu.Lock()
	st := m.state
	thr := m.thr
	cp := m.copy
	m.stageMu.Unlock()
	out := StatusOf(st, "", 0, time.Now())
	out.Elapsed = time.Since(m.start)
	if cp != nil {
		out.RowsCopied = cp.Copied()
		out.ChunkSize = cp.ChunkSize()
	}
	if m.replay != nil {
		rs := m.replay.Stats()
		out.ReplayEvents, out.ReplayAppliedOps, out.ReplayPosition, out.ReplayCatchingUp = rs.Events, rs.Applied, rs.Position, rs.Behind
	}
	if thr != nil {
		ts := thr.Status()
		out.Throttle = &ts
	}
	return out
}

var _ control.Handler = (*controller)(nil)

// listenControl opens the control socket when one is configured.
func (m *migrator) listenControl(ctx context.Context, c *controller) (func(), error) {
	if m.opts.ControlSocket == "" {
		return func() {}, nil
	}
	srv, err := control.Listen(ctx, m.opts.ControlSocket, c)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	m.opts.Log("control socket: %s (enginemig control --socket %s status|pause|resume|abort|release-cutover|chunk-time=...)", m.opts.ControlSocket, m.opts.ControlSocket)
	return func() { srv.Close() }, nil
}
