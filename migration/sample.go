package migration

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/shadow/verify"
)

// Verification's cost is sampled once during the copy, for the whole run's ETA (progress.go):
// what it costs depends on the application's load and on the pace's rests, which the copy's own
// rate does not tell (measured 0.76, 1.39 and 1.50 times the copy's time at 25, 50 and 75 % load;
// docs/how-it-works/progress.md). Once sampleAt percent of the rows are copied, the copy waits
// between two chunks while verification compares the table's first rows: 1/sampleShare of them,
// or sampleChunks of the copy's chunks if that is more, never more than a quarter of those copied
// (so that it compares only what the copy has written), for sampleBudget at most. What one row
// cost it, apart from the pace's rests, is verification's estimate together with the rests the
// pace asks for then (verifyCost.left). Its chunks are as long as the copy's or shorter
// (Pipeline.Sample), and it waits until a quarter of the rows copied holds sampleChunks of the
// copy's chunks: a few chunks shorter than verification's say more of a chunk's fixed cost than of
// its rows' (a sample of 8 chunks capped at an eighth of it was 1.7 times verification's time per
// row). The sample's own time per row was tried as the estimate, and was 30 to 75 % short at 50
// and 75 % load: the pace rests more as the run goes on, and a sample at a tenth of the copy saw
// rests of a quarter of verification's. The sample is real verification: a range that differs is
// recopied. Tables under sampleMinRows are verified in seconds and not sampled.
const (
	sampleAt      = 10
	sampleShare   = 25
	sampleChunks  = 16
	sampleBudget  = 5 * time.Second
	sampleMinRows = 80_000
)

// verifyCost is what one row cost the sample, apart from the pace's rests: the wait for its
// chunk's lock, the lock, and the work on the shadow after it (each per row; zero: no sample).
type verifyCost struct{ lockWait, held, after time.Duration }

// left estimates verification of rows while the pace rests restRatio times each lock: a chunk
// takes its lock, holds it, then works on the shadow while it rests, for the longer of the two
// (verify.Run; measured against verification's own parts at 25, 50 and 75 % load, within 6 %).
func (c verifyCost) left(rows float64, restRatio float64) time.Duration {
	perRow := c.lockWait.Seconds() + c.held.Seconds() + max(c.after.Seconds(), restRatio*c.held.Seconds())
	return seconds(rows * perRow)
}

// sampler is the copy's Waiter that takes the sample when it is due.
type sampler struct {
	copier.Waiter
	m    *migrator
	mu   sync.Mutex
	done atomic.Bool
}

// sampling wraps w with the sample where the run verifies and can sample (not on a Galera node,
// which recopies nothing, nor in a resumed copy, whose first rows were copied by another run).
func (m *migrator) sampling(w copier.Waiter) copier.Waiter {
	if m.opts.SkipVerify || m.opts.Cutover.Galera || m.resume != nil || m.ti.Rows < sampleMinRows {
		return w
	}
	return &sampler{Waiter: w, m: m}
}

func (s *sampler) Wait(ctx context.Context) error {
	if !s.done.Load() {
		s.mu.Lock()
		err := s.take(ctx)
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return s.Waiter.Wait(ctx)
}

// take samples verification once it is due. Only the context's end is an error: a sample that
// fails leaves the ETA without it, and the verification stage to find what it found.
func (s *sampler) take(ctx context.Context) error {
	total, pr := s.m.ti.Rows, s.m.pipe.Progress()
	copied := pr.RowsCopied
	if s.done.Load() || copied*100 < total*sampleAt || copied/4 < sampleChunks*pr.ChunkSize {
		return nil
	}
	s.done.Store(true)
	rows := min(copied/4, max(total/sampleShare, sampleChunks*pr.ChunkSize))
	res, err := s.m.pipe.Sample(ctx, s.m.verifyPace(), verify.Sample{Rows: rows, Budget: sampleBudget})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil || res.Rows == 0 {
		s.m.log.Warn("could not sample verification for the ETA", "error", err, "rows", res.Rows)
		return nil
	}
	n := time.Duration(res.Rows)
	cost := verifyCost{lockWait: res.LockWait / n, held: res.LockTime / n, after: res.AfterRelease / n}
	s.m.verifyCost.Store(&cost)
	s.m.log.Info("sampled verification for the ETA", "rows", res.Rows, "chunks", res.Chunks, "took", res.Duration.Round(time.Millisecond),
		"recopied", res.Repaired, "lock_wait", res.LockWait.Round(time.Millisecond), "held", res.LockTime.Round(time.Millisecond),
		"after_release", res.AfterRelease.Round(time.Millisecond), "rests", res.Rests.Round(time.Millisecond))
	return nil
}

// sampledCost is the sample's measure, zero before it.
func (m *migrator) sampledCost() verifyCost {
	if c := m.verifyCost.Load(); c != nil {
		return *c
	}
	return verifyCost{}
}
