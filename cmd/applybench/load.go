package main

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/bench/arrival"
)

// The application load is counted in requests: one request is what a web application's page does
// on its hot table, all autocommit, as the table's shape (shape.go) lays it out: for the game
// table the production mix in one go (per 24 statements 16 primary-key SELECTs, 7 UPDATEs and 1
// INSERT, plus one DELETE every 10th request), for a forum's posts (-forum) reads, searches,
// likes and a new post (forum.go). Each client thread starts its requests on a fixed grid of
// slots (bench/arrival): a request the thread was still busy with when its slot came is lost,
// not made up afterwards, so a stall is counted as the throughput the application lost while
// waiting.

// longGap is the write gap applybench itemises (the stall goal is 100 ms).
const longGap = 80 * time.Millisecond

// writeGap is a time without a completed write, ended at end.
type writeGap struct {
	d   time.Duration
	end time.Time
}

// loadStats is what one measurement of the load saw.
type loadStats struct {
	rps         float64 // requests completed per second over the whole measurement
	errors      int64
	maxWriteGap time.Duration
	longGaps    []writeGap
	p99         time.Duration    // of a request's duration
	seconds     *arrival.Seconds // requests completed per second from the conversion's start
	missed      int64
	stmts       stmts // every statement that succeeded, for the latency by stage
}

// load runs the application: threads clients, rate requests/s in total (0: as fast as they can),
// for d (0: until ctx ends). Completions are counted per second from countFrom (zero: from the
// start), which the caller sets to the conversion's start.
type load struct {
	db      *sql.DB
	shape   shape
	threads int
	rows    int
}

func (l load) run(ctx context.Context, rate float64, d time.Duration, countFrom <-chan time.Time) loadStats {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var done, errs, missed atomic.Int64
	var lastWrite atomic.Int64
	var gapMu sync.Mutex
	var maxGap time.Duration
	var long []writeGap
	start := time.Now()
	lastWrite.Store(start.UnixNano())
	var secs atomic.Pointer[arrival.Seconds]
	secs.Store(arrival.NewSeconds(start))
	if countFrom != nil {
		go func() {
			select {
			case t := <-countFrom:
				secs.Store(arrival.NewCounter(t, bucket))
			case <-ctx.Done():
			}
		}()
	}
	wrote := func(now time.Time) {
		prev := time.Unix(0, lastWrite.Swap(now.UnixNano()))
		if g := now.Sub(prev); g > longGap {
			gapMu.Lock()
			maxGap = max(maxGap, g)
			long = append(long, writeGap{g, now})
			gapMu.Unlock()
		} else if g > 0 {
			gapMu.Lock()
			maxGap = max(maxGap, g)
			gapMu.Unlock()
		}
	}
	lat := make([][]time.Duration, l.threads)
	per := make([]stmts, l.threads)
	var wg sync.WaitGroup
	for i := 0; i < l.threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			var slots *arrival.Slots
			if rate > 0 {
				interval := time.Duration(float64(time.Second) * float64(l.threads) / rate)
				// Threads start spread over one interval, as independent users would.
				slots = arrival.NewSlots(start.Add(interval*time.Duration(i)/time.Duration(l.threads)), interval)
			}
			for n := 0; ; n++ {
				if slots != nil && slots.Wait(ctx) != nil || ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				if err := l.request(context.WithoutCancel(ctx), r, n, wrote, per[i].add); err != nil {
					errs.Add(1)
					continue
				}
				now := time.Now()
				lat[i] = append(lat[i], now.Sub(t0))
				done.Add(1)
				secs.Load().Add(now)
			}
			if slots != nil {
				missed.Add(slots.Missed())
			}
		}(i)
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return loadStats{rps: float64(done.Load()) / time.Since(start).Seconds(), errors: errs.Load(), maxWriteGap: maxGap,
		longGaps: long, p99: arrival.Percentile(all, 99), seconds: secs.Load(), missed: missed.Load(), stmts: merge(per)}
}

// request runs one request's statements; wrote is told when each write completed, record of
// every statement that succeeded.
func (l load) request(ctx context.Context, r *rand.Rand, n int, wrote func(time.Time), record func(write bool, end time.Time, took time.Duration)) error {
	for _, st := range l.shape.request(n) {
		t0 := time.Now()
		if err := st.exec(ctx, l.db, r, l.rows); err != nil {
			return err
		}
		now := time.Now()
		record(st.write, now, now.Sub(t0))
		if st.write {
			wrote(now)
		}
	}
	return nil
}
