package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// prober times the probe every `every` in the background, one read at a time, and keeps what
// the governor has not taken yet. A read that takes longer than `every` delays the next one:
// reads never pile up behind a lock.
type prober struct {
	probe func(ctx context.Context) error
	every time.Duration

	mu       sync.Mutex
	fresh    []probeRead // completed since the last take
	last     probeRead
	inFlight time.Time // when the read running now began (zero: none)
	started  int64     // reads begun, each a SELECT the server counts (Com_select)
	err      error     // the last read's error, nil once one succeeds again
	during   *hdrhistogram.Histogram
}

func newProber(probe func(ctx context.Context) error, every time.Duration) *prober {
	return &prober{probe: probe, every: every}
}

// read times one probe.
func (p *prober) read(ctx context.Context) {
	p.mu.Lock()
	at := time.Now()
	p.inFlight = at
	p.started++
	p.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, minCheckTimeout)
	err := p.probe(rctx)
	cancel()
	rd := probeRead{at: at, took: time.Since(at)}
	// A read still waiting at its timeout is a measurement, not a broken probe: the table was
	// held (by the application's writers, another session's lock) and the read took at least
	// this long. Counted as such, it tells the pace the application waits; as an error it ended
	// a run before its copy began whenever writers kept the reads queued for a second.
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight = time.Time{}
	if err != nil {
		if ctx.Err() == nil {
			p.err = fmt.Errorf("probe read: %w", err)
		}
		return
	}
	p.err, p.last = nil, rd
	if len(p.fresh) < 10*latencyWindow { // nobody takes them (a stalled governor): keep the newest few
		p.fresh = append(p.fresh, rd)
	}
	if p.during != nil {
		_ = p.during.RecordValue(min(max(rd.took.Microseconds(), 1), probeHistMax)) // within the bounds: cannot fail
	}
}

// probeHistMax is the longest read the run's histogram records apart (µs); longer ones count as it.
const probeHistMax = int64(5 * time.Minute / time.Microsecond)

// run reads until ctx ends.
func (p *prober) run(ctx context.Context) {
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.read(ctx)
	}
}

// take returns the reads completed since the last take, the latest read (one still running
// counts with its time so far when that is longer), and the last read's error.
func (p *prober) take() (reads []probeRead, latest time.Duration, started int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	reads, p.fresh = p.fresh, nil
	latest = p.last.took
	if !p.inFlight.IsZero() {
		latest = max(latest, time.Since(p.inFlight))
	}
	return reads, latest, p.started, p.err
}

// record starts the run's histogram: every read from now on.
func (p *prober) record() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.during = hdrhistogram.New(1, probeHistMax, 3)
}

// p99 is the p99 of the reads since record (0: none).
func (p *prober) p99() (time.Duration, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.during == nil || p.during.TotalCount() == 0 {
		return 0, 0
	}
	return time.Duration(p.during.ValueAtQuantile(99)) * time.Microsecond, p.during.TotalCount()
}
