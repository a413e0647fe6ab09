package migration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/lockwait"
	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/shadow"
	"github.com/enginemig/enginemig/state"
)

// recorder owns the migration's row in the state table: every write to it goes through update,
// which also copies the pipeline's counters and checkpoint into it.
type recorder struct {
	store  *state.Store
	log    *slog.Logger
	pipe   atomic.Pointer[shadow.Pipeline]
	last   atomic.Pointer[Progress] // the newest progress snapshot, for control status and metrics
	waits  *lockwait.Watcher        // what the migration waits on, for the progress display
	mu     sync.Mutex               // guards st
	st     state.State
	saving sync.Mutex // one save at a time
}

// startRecord resumes the record of an interrupted run, or begins a new one from fresh.
func startRecord(ctx context.Context, store *state.Store, resume *state.State, fresh state.State, log *slog.Logger) (*recorder, error) {
	r := &recorder{store: store, log: log}
	if resume != nil {
		r.st = *resume
		return r, nil
	}
	r.st = fresh
	if err := store.Begin(ctx, &r.st); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *recorder) attach(p *shadow.Pipeline) { r.pipe.Store(p) }

// update applies mutate and saves the row with the current counters. A failed save is logged,
// not fatal: the row is progress for status and resume, and the next save repairs it.
func (r *recorder) update(ctx context.Context, mutate func(*state.State)) {
	if err := r.save(ctx, mutate); err != nil {
		r.log.Warn("could not save the migration state", "error", err)
	}
}

// save writes outside mu: a write that waits (a backup's FLUSH TABLES WITH READ LOCK holds every
// write for seconds) must not hold up snapshot, which the lock-wait watcher and status read, or
// nobody would report what apply waits for. saving keeps the writes in order.
func (r *recorder) save(ctx context.Context, mutate func(*state.State)) error {
	r.saving.Lock()
	defer r.saving.Unlock()
	r.mu.Lock()
	mutate(&r.st)
	if p := r.pipe.Load(); p != nil {
		cp, pr := p.Checkpoint(), p.Progress()
		r.st.RowsCopied, r.st.CaptureChanges = pr.RowsCopied, pr.Capture.Changes
		if cp.Watermark != nil {
			r.st.Watermark = state.EncodeKey(cp.Watermark)
		}
		if cp.ResumeAt != "" {
			r.st.CaptureResume = cp.ResumeAt
		}
	}
	st := r.st
	r.mu.Unlock()
	if st.ID == 0 {
		return nil
	}
	err := r.store.Save(context.WithoutCancel(ctx), &st)
	r.mu.Lock()
	r.st.UpdatedAt = st.UpdatedAt
	r.mu.Unlock()
	return err
}

// RecordSwap notes the capture's position under the cut-over's lock (cutover.Recorder). Unlike
// progress, this save must succeed: without it a rollback would not know where to capture from.
func (r *recorder) RecordSwap(ctx context.Context, pos string) error {
	return r.save(ctx, func(st *state.State) { st.CaptureCutover = shadow.Position(pos) })
}

func (r *recorder) finish(ctx context.Context, stage state.Stage, errText string) {
	now := time.Now().UTC()
	r.update(ctx, func(st *state.State) { st.Stage, st.Error, st.FinishedAt = stage, errText, &now })
}

func (r *recorder) snapshot() state.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// track calls opts.Progress periodically and saves the checkpoint every opts.saveEvery, until the
// returned stop is called.
func (r *recorder) track(ctx context.Context, p *shadow.Pipeline, opts Options, start time.Time) (stop func()) {
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		tick := time.NewTicker(opts.ProgressEvery)
		defer tick.Stop()
		lastSave := time.Now()
		var clock stageClock
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			st, pr := r.snapshot(), p.Progress()
			if opts.Progress != nil {
				prog := Progress{Stage: st.Stage, RowsCopied: pr.RowsCopied, RowsTotal: st.RowsTotal, ChunkSize: pr.ChunkSize,
					CaptureChanges: pr.Capture.Changes, CaptureCatchingUp: pr.Capture.Behind, Elapsed: time.Since(start)}
				clock.fill(&prog, pr.RowsVerified, time.Now())
				prog.Waiting = r.waits.Summary()
				opts.Progress(prog)
				r.last.Store(&prog)
			}
			if time.Since(lastSave) > opts.saveEvery {
				lastSave = time.Now()
				r.update(ctx, func(*state.State) {})
			}
		}
	}()
	return func() { cancel(); <-done }
}

// hook runs the user's hook at a point it is offered at, with a fresh snapshot of the state.
func (m *migrator) hook(ctx context.Context, at Point) error {
	if m.opts.Hook == nil || !slices.Contains(HookPoints, at) {
		return nil
	}
	m.rec.update(ctx, func(*state.State) {})
	st := m.rec.snapshot()
	return m.opts.Hook(ctx, at, &st)
}

// settled is an error whose consequences the stage has already recorded: it is returned as is.
type settled struct{ err error }

func (s *settled) Error() string { return s.err.Error() }
func (s *settled) Unwrap() error { return s.err }

// pending is a cut-over that gave up (cutover.ErrGaveUp) with the copy finished: the shadow and
// the state are kept for a run that goes straight to the swap.
type pending struct{ err error }

func (p *pending) Error() string { return p.err.Error() }
func (p *pending) Unwrap() error { return p.err }

// keepShadow is a failure after which the shadow must not be dropped (it was never created, or
// the tables' state is unclear).
type keepShadow struct{ err error }

func (k *keepShadow) Error() string { return k.err.Error() }
func (k *keepShadow) Unwrap() error { return k.err }

// stopped ends a migration that failed in a stage. The shadow is dropped so a retry starts
// clean, except when the connection was lost: then the next run resumes from the state table.
func (m *migrator) stopped(ctx context.Context, err error) (*Result, error) {
	var s *settled
	if errors.As(err, &s) {
		if m.res.Cutover != nil {
			return m.res, s.err
		}
		return nil, s.err
	}
	if errors.Is(err, errSimulatedCrash) {
		return nil, err
	}
	if dbconn.IsConnectionLoss(err) && ctx.Err() == nil {
		return nil, m.suspend(ctx, err)
	}
	var p *pending
	if errors.As(err, &p) {
		return nil, m.pend(ctx, p.err)
	}
	var k *keepShadow
	if errors.As(err, &k) {
		return nil, m.fail(ctx, k.err, false)
	}
	return nil, m.fail(ctx, err, true)
}

// fail records the failure, drops the shadow when asked and returns err (coded FailedSafe if it
// had no code).
func (m *migrator) fail(ctx context.Context, err error, drop bool) error {
	bg := context.WithoutCancel(ctx)
	if m.pipe != nil {
		m.pipe.Stop() // no replay batch may land after the drop
	}
	dropped := false
	if drop {
		if derr := m.dropShadow(bg); derr != nil {
			m.log.Warn("could not drop the shadow; `enginemig cleanup` removes it", "error", derr)
		} else {
			dropped = true
		}
	}
	err = m.coded(err)
	if lt := m.ctl.waits.TimeoutErr(); lt != nil {
		err = lt
	} else if errors.Is(err, context.Canceled) {
		what := "interrupted; the original is unchanged"
		if dropped {
			what = "interrupted; the shadow table was dropped and the original is unchanged"
		}
		err = outcome.New(outcome.FailedSafe, errors.New(what), "")
	}
	m.rec.finish(bg, state.StageFailed, err.Error())
	m.hook(bg, PointFailure)
	return err
}

// pend records a cut-over that could not get in before --cutover-timeout: capture stops (its
// position saved for the next run), the shadow, its capture and the state stay, and the record
// stays at the cut-over, so running the same apply again goes straight to the swap.
func (m *migrator) pend(ctx context.Context, err error) error {
	if m.pipe != nil {
		m.pipe.Stop()
	}
	m.rec.update(context.WithoutCancel(ctx), func(st *state.State) { st.Error = "cut-over pending: " + err.Error() })
	m.hook(context.WithoutCancel(ctx), PointFailure)
	return outcome.New(outcome.CutoverPending, fmt.Errorf("cut-over: %w", err),
		"the copy is done and the shadow is kept: run the same apply again to go straight to the cut-over (with a higher --cutover-timeout, or once the sessions named here are gone), or `enginemig cleanup` to drop the shadow")
}

// suspend records a migration interrupted by a lost connection: the shadow and the state stay so
// that running the same apply again resumes it.
func (m *migrator) suspend(ctx context.Context, err error) error {
	if m.pipe != nil {
		m.pipe.Stop()
	}
	m.rec.update(context.WithoutCancel(ctx), func(st *state.State) { st.Error = "connection lost: " + err.Error() })
	return outcome.New(outcome.NeedsAttention, fmt.Errorf("%w to the server: %w", errSuspended, err),
		"the shadow table and the progress are kept: run the same apply again to resume")
}
