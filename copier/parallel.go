package copier

import (
	"context"
	"fmt"

	"github.com/enginemig/enginemig/pace/throttle"
	"golang.org/x/sync/errgroup"
)

// Parallel chunks. While nobody waits for the table, up to Config.Workers chunks are copied at
// once, each one direct REPLACE ... SELECT over its own key range: MyISAM read locks are shared,
// and InnoDB inserts into disjoint key ranges do not meet. As soon as a chunk is prepared with
// other clients waiting (Chunker.target), the chunks in flight finish and the copy goes on with
// one, staged and resting (copyAlone). Each chunk holds the Order from before its read until it
// is written, as a single one does; progress.go keeps Ahead and the resume watermark right when
// chunks finish out of order.
//
// Two chunks at once copy faster than one, except into a target with an AUTO_INCREMENT column:
// InnoDB then runs them one after another, even though they supply every value (plan.ParallelCopy
// says when; the figures are in docs/bench/constants.md). The caller chooses Workers.

// workers runs parallel chunks in an errgroup that fails together; it is started at the first
// parallel chunk and waited for before a chunk that must run alone.
type workers struct {
	parent context.Context
	limit  int
	g      *errgroup.Group
	ctx    context.Context
}

func newWorkers(ctx context.Context, limit int) *workers {
	return &workers{parent: ctx, limit: max(limit, 1)}
}

// run starts fn, once fewer than limit chunks are in flight.
func (w *workers) run(fn func(ctx context.Context) error) {
	if w.g == nil {
		w.g, w.ctx = errgroup.WithContext(w.parent)
		w.g.SetLimit(w.limit)
	}
	w.g.Go(func() error { return fn(w.ctx) })
}

// context ends when the copy's does or when a chunk in flight fails.
func (w *workers) context() context.Context {
	if w.g == nil {
		return w.parent
	}
	return w.ctx
}

// wait returns once no chunk is in flight, with the first error of those that were.
func (w *workers) wait() error {
	if w.g == nil {
		return nil
	}
	err := w.g.Wait()
	w.g = nil
	return err
}

// alongside reports whether s's chunk may run beside others: while nobody waits for the table,
// or with a Pace.Room while it leaves room for more than one. A test may keep the workers in
// flight whoever waits (Faults.CopyAlwaysParallel).
func (c *Copier) alongside(ctx context.Context, s Step) bool {
	if c.cfg.Workers <= 1 || faultsOf(ctx).CopyAlwaysParallel() {
		return c.cfg.Workers > 1
	}
	if r := c.cfg.Pace.Room; r != nil {
		return r.Workers(c.cfg.Workers) > 1
	}
	return !s.Contended
}

// copyAlongside copies chunk seq, s, directly, while other chunks may be in flight; it sizes the
// walk's following chunks once it is written.
func (c *Copier) copyAlongside(ctx context.Context, s Step, seq int) error {
	if seq%2 == 1 {
		if err := throttle.Sleep(ctx, faultsOf(ctx).OvertakeDelay()); err != nil {
			return err
		}
	}
	end := c.order.BeginChunk()
	defer end()
	c.began(seq, s.Hi)
	ch, err := c.copyDirect(ctx, s.Range)
	if err != nil {
		return fmt.Errorf("copy: chunk after %v: %w", s.Lo, err)
	}
	c.lockTime.Add(int64(ch.held))
	n := int64(s.Size)
	if s.Last() {
		n = ch.rows
	}
	c.chunks.held(ch.held)
	c.chunks.took(s, ch.held)
	c.finished(seq, s.Hi, n)
	return nil
}
