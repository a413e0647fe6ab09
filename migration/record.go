package migration

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/shadow"
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

// saveEvery is how often track saves the checkpoint; a test may save more often
// (Faults.SaveEvery).
const saveEvery = 2 * time.Second

// track calls opts.Progress periodically (the ETA counts verification at cost's measure) and saves
// the checkpoint every saveEvery, until the returned stop is called.
func (r *recorder) track(ctx context.Context, p *shadow.Pipeline, opts Options, start time.Time, cost func() verifyCost) (stop func()) {
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	every := saveEvery
	if d := faultsOf(ctx).SaveEvery(); d > 0 {
		every = d
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(opts.ProgressEvery)
		defer tick.Stop()
		lastSave := time.Now()
		clock := stageClock{window: opts.CopyWindow}
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
				clock.fill(&prog, pr.RowsVerified, pr.CopyWalk, cost(), time.Now())
				prog.Waiting = r.waits.Summary()
				opts.Progress(prog)
				r.last.Store(&prog)
			}
			if time.Since(lastSave) > every {
				lastSave = time.Now()
				r.update(ctx, func(*state.State) {})
			}
		}
	}()
	return func() { cancel(); <-done }
}
