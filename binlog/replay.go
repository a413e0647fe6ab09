package binlog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Batch limits: a batch is applied in one transaction, so larger batches mean fewer commits,
// statements and round trips for the server the application needs. While someone waits for
// replay (a verification chunk, a catch-up, the cut-over) a batch ends when the stream has been
// idle for batchIdleGap or maxBatchDelay after its first event: waiting longer for events that are
// not coming would add that delay to every catch-up. While nobody waits, a batch keeps collecting
// for patientBatchDelay; a WaitFor call cuts it short.
// maxBatchBytes bounds what a batch holds in memory, whatever the width of the table's rows (2000
// changes of 2 MB rows would be 8 GB with their before images).
const (
	maxBatchChanges   = 2000
	maxBatchBytes     = 8 << 20
	frugalBatchDelay  = 5 * time.Second
	maxBatchDelay     = 20 * time.Millisecond
	batchIdleGap      = time.Millisecond
	patientBatchDelay = 100 * time.Millisecond
)

// Replayer reads the stream batch by batch for whoever applies the batches (package shadow, which
// decides what may be written when, against the copy), and tracks how far they got: the caller
// takes each batch with Next and reports it written with Done.
type Replayer struct {
	stream *Stream

	mu       sync.Mutex
	applied  Position
	resumeAt Position // last group boundary at or before applied
	waiters  []chan struct{}
	events   atomic.Int64
	ops      atomic.Int64
	behind   atomic.Bool
	pending  atomic.Int64 // unix nanoseconds of the oldest event read but not applied; 0: none
	// hurry wakes a patient batch when WaitFor starts waiting (mu guards waiters).
	hurry    chan struct{}
	patience time.Duration // patientBatchDelay; tests set their own
	// Frugal, when set and true, makes a batch collect for frugalBatchDelay instead: fewer,
	// larger statements while the account's hourly statements are spent (set before Next).
	Frugal func() bool
	// barrier (mu guards it) is set by Barrier; held is the event read past it, the first of the
	// batch after it is lifted (only the collecting goroutine touches held).
	barrier *barrier
	held    *Item
}

// barrier is a position no change past which is applied until lifted is closed.
type barrier struct {
	at     Position
	lifted chan struct{}
}

// NewReplayer replays stream, starting from the stream's current position.
func NewReplayer(stream *Stream) *Replayer {
	p := stream.Position()
	return &Replayer{stream: stream, applied: p, resumeAt: p, hurry: make(chan struct{}, 1), patience: patientBatchDelay}
}

// Batch is the changes read together, and where the stream stands after them.
type Batch struct {
	Changes       []Change
	pos, boundary Position // after the batch; the last group boundary within it (zero if none)
}

// Next blocks for one event, then takes whatever else arrives within maxBatchDelay.
func (r *Replayer) Next(ctx context.Context) (Batch, error) {
	changes, pos, boundary, err := r.collect(ctx)
	return Batch{Changes: changes, pos: pos, boundary: boundary}, err
}

// Done records that b was written with ops operations: WaitFor callers up to its position wake.
func (r *Replayer) Done(b Batch, ops int) {
	if len(b.Changes) > 0 {
		r.events.Add(int64(len(b.Changes)))
		r.ops.Add(int64(ops))
	}
	r.setApplied(b.pos, b.boundary)
	r.pending.Store(0)
}

// eventTime is when an event happened, for the replay lag: its header timestamp counts whole
// seconds, so an event that arrives within a second of it is dated by its arrival (exact while
// replay keeps up), and an older one by the header (a backlog, e.g. after a resume).
func eventTime(header, arrived time.Time) time.Time {
	if header.IsZero() || arrived.Sub(header) < time.Second {
		return arrived
	}
	return header
}

// Barrier keeps replay from applying any change of an event past p until lift is called: events
// up to p are applied as usual (WaitFor(p) returns once they are), the first event past p that
// changes the table waits with the rest behind it, and events without changes of the table go
// on, so positions keep moving. Verification sets one at the position it read while the source
// was read-locked: the target then stays at the source's state under that lock, for as long as
// its checksum takes, after the source is let go (shadow/verify). One barrier at a time; lift is
// idempotent.
func (r *Replayer) Barrier(p Position) (lift func()) {
	b := &barrier{at: p, lifted: make(chan struct{})}
	r.mu.Lock()
	r.barrier = b
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.barrier == b {
				r.barrier = nil
			}
			r.mu.Unlock()
			close(b.lifted)
		})
	}
}

// stopsAt returns the barrier's lifted channel when item must wait for it (it changes the table
// and lies past the barrier), nil otherwise.
func (r *Replayer) stopsAt(item Item) chan struct{} {
	if len(item.Changes) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.barrier == nil || item.Pos.Compare(r.barrier.at) <= 0 {
		return nil
	}
	return r.barrier.lifted
}

// first takes a batch's first event: the one held back at a barrier, or the stream's next, once
// no barrier holds it.
func (r *Replayer) first(ctx context.Context) (Item, error) {
	var item Item
	if r.held != nil {
		item, r.held = *r.held, nil
	} else {
		var err error
		if item, err = r.stream.Next(ctx); err != nil {
			return Item{}, err
		}
	}
	for {
		lifted := r.stopsAt(item)
		if lifted == nil {
			return item, nil
		}
		select {
		case <-lifted:
		case <-ctx.Done():
			r.held = &item
			return Item{}, ctx.Err()
		}
	}
}

// more reports whether item joins the batch being collected; if a barrier stops it, it is held
// for the next batch.
func (r *Replayer) more(item Item) bool {
	if r.stopsAt(item) != nil {
		r.held = &item
		return false
	}
	return true
}

// collect blocks for one event, then takes what else arrives while the batch may grow (see the
// batch limits) and no barrier stops it. It returns the position after the batch and the last
// group boundary within it (zero if none).
func (r *Replayer) collect(ctx context.Context) ([]Change, Position, Position, error) {
	item, err := r.first(ctx)
	if err != nil {
		return nil, Position{}, Position{}, err
	}
	r.pending.Store(eventTime(item.Time, time.Now()).UnixNano())
	var b collected
	b.add(item)
	select { // a hurry from a wait that may have ended since: waited says whether one goes on
	case <-r.hurry:
	default:
	}
	if !r.waited() {
		err := r.collectPatiently(ctx, &b)
		if errors.Is(err, errStopped) {
			return b.changes, b.pos, b.boundary, nil
		}
		if err != nil {
			return nil, Position{}, Position{}, err
		}
	}
	if err := r.collectPromptly(ctx, &b); err != nil {
		return nil, Position{}, Position{}, err
	}
	return b.changes, b.pos, b.boundary, nil
}

// collected is a batch being read.
type collected struct {
	changes       []Change
	bytes         int // the changes' row images (rowBytes)
	pos, boundary Position
}

func (b *collected) add(item Item) {
	b.changes = append(b.changes, item.Changes...)
	for _, c := range item.Changes {
		b.bytes += rowBytes(c.Before) + rowBytes(c.After)
	}
	b.pos = item.Pos
	if item.Boundary {
		b.boundary = item.Pos
	}
}

// full reports whether the batch holds as much as one may (the batch limits).
func (b *collected) full() bool {
	return len(b.changes) >= maxBatchChanges || b.bytes >= maxBatchBytes
}

// collectPatiently adds events for up to patientBatchDelay while nobody waits for replay. It
// returns early, leaving the rest to collectPromptly, when WaitFor starts waiting.
func (r *Replayer) collectPatiently(ctx context.Context, b *collected) error {
	patience := r.patience
	if r.Frugal != nil && r.Frugal() {
		patience = frugalBatchDelay
	}
	waitCtx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	go func() {
		select {
		case <-r.hurry:
			cancel()
		case <-waitCtx.Done():
		}
	}()
	for !b.full() {
		item, err := r.stream.Next(waitCtx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		if !r.more(item) {
			return errStopped
		}
		b.add(item)
	}
	r.behind.Store(true) // full: more events were waiting
	return nil
}

// errStopped ends a batch at a barrier.
var errStopped = errors.New("replay stopped at a barrier")

// collectPromptly adds events until the stream is idle for batchIdleGap or maxBatchDelay has
// passed: someone waits for this batch.
func (r *Replayer) collectPromptly(ctx context.Context, b *collected) error {
	deadline := time.Now().Add(maxBatchDelay)
	for !b.full() {
		wait := time.Until(deadline)
		if wait <= 0 {
			r.behind.Store(true)
			return nil
		}
		waitCtx, cancel := context.WithTimeout(ctx, min(wait, batchIdleGap))
		item, err := r.stream.Next(waitCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				r.behind.Store(false) // drained: nothing else was waiting
				return nil
			}
			return err
		}
		if !r.more(item) {
			return nil
		}
		b.add(item)
	}
	return nil
}

// waited reports whether a WaitFor call is waiting.
func (r *Replayer) waited() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.waiters) > 0
}

func (r *Replayer) setApplied(p, boundary Position) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if boundary.Name != "" && boundary.Compare(r.resumeAt) > 0 {
		r.resumeAt = boundary
	}
	if p.Name == "" || p.Compare(r.applied) <= 0 {
		return
	}
	r.applied = p
	for _, w := range r.waiters {
		close(w)
	}
	r.waiters = nil
}

// ResumeAt is the newest position at a transaction boundary up to which every change has been
// applied: where a resumed stream may restart.
func (r *Replayer) ResumeAt() Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resumeAt
}

// Applied is the position up to which every change has been applied.
func (r *Replayer) Applied() Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied
}

// Stats are the replayer's counters (package shadow reports them as its capture's).
type Stats struct {
	Events  int64 // row changes read for the table
	Applied int64 // operations written to the target, as reported to Done
	Behind  bool  // more events were waiting at the last batch
	// LagSeconds is how long ago the oldest event read but not yet applied happened (0 while
	// replay waits for events): see eventTime.
	LagSeconds float64
	// AppliedAt is the position up to which every change has been applied.
	AppliedAt Position
}

// Stats returns the current counters.
func (r *Replayer) Stats() Stats {
	st := Stats{Events: r.events.Load(), Applied: r.ops.Load(), AppliedAt: r.Applied(), Behind: r.behind.Load()}
	if p := r.pending.Load(); p != 0 {
		st.LagSeconds = max(0, time.Since(time.Unix(0, p)).Seconds())
	}
	return st
}

// WaitFor blocks until every change up to p is applied, or ctx ends.
func (r *Replayer) WaitFor(ctx context.Context, p Position) error {
	for {
		r.mu.Lock()
		if r.applied.Compare(p) >= 0 {
			r.mu.Unlock()
			return nil
		}
		w := make(chan struct{})
		r.waiters = append(r.waiters, w)
		r.mu.Unlock()
		select {
		case r.hurry <- struct{}{}:
		default:
		}
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
