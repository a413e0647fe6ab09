// Package shadow keeps a target table equal to its source while the application writes: it
// owns change capture, the copy, verification and the ordering rule between them (order.go).
// Apply uses it from `_t_new`'s creation to the swap, rollback from the swap back.
package shadow

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/shadow/verify"
)

// Config says what to keep equal and how to capture.
type Config struct {
	Conn   dbconn.Config
	DB     *sql.DB // control pool: positions, index builds, verification (3+ connections)
	Source *table.Info
	Target string // in the source's schema
	// Mode is how changes are captured; Start where the capture starts (empty: now; a resume
	// passes the Checkpoint's ResumeAt, a rollback the cut-over's position).
	Mode  Mode
	Start Position
	// Version is the server's VERSION() (binlog capture reads the binlog as its flavour's
	// replica). Binlog capture: a server id unique among the replicas, and statements to step
	// over in DDL detection (rollback starts just before the swap).
	Version     string
	ServerID    uint32
	IgnoreQuery func(query string) bool
	// Triggers are the source's trigger names: dropping one stops capture like other DDL.
	Triggers []string
	// ChangeLog names trigger capture's log (table.ChangeLogName).
	ChangeLog string
	// Filled says the target already holds the source's rows as of Start, so nothing will be
	// copied (a rollback's kept original): a keyless table's changes then all apply (rule 5).
	Filled bool
	// LockWithin is how long trigger capture's set-up keeps trying for a moment the source is
	// free of the application's statements (DefaultLockWithin when 0).
	LockWithin time.Duration
	// Galera says the server is a Galera node: no session of trigger capture then holds a lock
	// on a table that commits through the cluster (triggercapture_galera.go).
	Galera bool
	// Hold, when set, holds back each verification chunk and trigger capture's periodic syncs
	// while it is Low (the account's hourly statement budget; the copy is held back by its own
	// waiter). Binlog replay is not held, or its stream would back up on the server: it collects
	// longer batches instead (binlog.Replayer.Frugal).
	Hold   Hold
	Logger *slog.Logger
}

// Pipeline is an open capture into the target, with the copy and verification on top of it.
// Capture runs in the background from Open to Stop; if it fails, every blocking method returns
// its error (ErrCapture) instead of its own.
type Pipeline struct {
	cfg            Config
	q              *table.SQL
	reader, writer *sql.DB
	capture        Capture
	order          order

	stop     context.CancelFunc
	group    *errgroup.Group
	groupCtx context.Context
	mu       sync.Mutex
	failed   error
	stopped  bool
	verified atomic.Int64 // rows compared by Verify so far
	early    *early       // verification started by StartVerify
	ddl      sync.Mutex   // held by Exec (an index build), and by verification's repairs
}

// verifyMaxChunk caps verification's chunks (copier.Pace.MaxChunk). The copy's cap of 200k rows
// made an idle verification of 1M rows at least 5 full scans of the source; chunks still follow
// the lock-time targets (250 ms idle, --chunk-time while anybody waits).
const verifyMaxChunk = 1 << 20

// early is a verification running beside the index build (StartVerify).
type early struct {
	done   chan struct{}
	cancel context.CancelFunc
	res    verify.Result
	err    error
}

// ErrCapture marks a failure of the capture (e.g. DDL on the source), reported by whatever
// pipeline method was running.
var ErrCapture = errors.New("change capture failed")

// Open sets the capture up and starts it from cfg.Start: everything it needs on the server is in
// place before Open returns, so before the first row is copied.
func Open(ctx context.Context, cfg Config) (p *Pipeline, err error) {
	if cfg.Logger == nil {
		cfg.Logger = dbconn.Logger(nil)
	}
	cfg.Mode = ModeOf(string(cfg.Mode))
	k, err := kindOf(cfg.Mode)
	if err != nil {
		return nil, err
	}
	q, err := table.NewSQL(cfg.Source, cfg.Target)
	if err != nil {
		return nil, err
	}
	p = &Pipeline{cfg: cfg, q: q}
	if q.Keyless() && cfg.Mode != Binlog && !q.Chunked() {
		// Trigger capture notes chunk-key values to sync; these rows have none.
		return nil, fmt.Errorf("%s has no unique key and no index to walk (none starts with an integer, DECIMAL, date or time, CHAR or VARCHAR column indexed whole): its changes can be captured from the binlog only (use --capture binlog)", cfg.Source.QuotedName())
	}
	switch {
	case !q.Keyless() || cfg.Filled:
	case cfg.Mode == Binlog:
		p.order.marks = newMarks(q.KeyOrder())
	default:
		p.order.groups = true
	}
	opened := p // p is nil once an error is returned
	defer func() {
		if err != nil {
			opened.closePools()
		}
	}()
	if p.reader, err = dbconn.OpenRowReader(ctx, cfg.Conn, "", readerConns); err != nil {
		return nil, err
	}
	if p.writer, err = dbconn.OpenRowWriter(ctx, cfg.Conn, "", writerConns(1)); err != nil {
		return nil, err
	}
	if p.order.marks != nil {
		p.order.marks.db = p.writer
	}
	if p.capture, err = k.open(ctx, p); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = stop
	p.group, p.groupCtx = errgroup.WithContext(runCtx)
	p.group.Go(func() error {
		err := p.capture.Run(p.groupCtx)
		if err == nil && runCtx.Err() == nil {
			err = errors.New("stopped unexpectedly")
		}
		if err != nil {
			p.mu.Lock()
			p.failed = fmt.Errorf("%w: %w", ErrCapture, err)
			p.mu.Unlock()
		}
		return err
	})
	return p, nil
}

// Failure is the capture's error, nil while it runs (or after a clean Stop).
func (p *Pipeline) Failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// Do runs fn with a context that ends when ctx does or when capture fails; then it returns the
// capture's error. Every blocking step of a migration runs inside it, so one error stops all.
func (p *Pipeline) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.groupCtx, cancel)()
	err := fn(ctx)
	if f := p.Failure(); f != nil {
		return f
	}
	return err
}

// Hold is what holds back work that must wait for the account's hourly statements.
type Hold interface {
	copier.Waiter
	Low() (why string, low bool)
}

// readerConns is the row reader pool's size: a copy chunk's read, and verification's.
const readerConns = 2

// Connections is the most connections a pipeline holds on the server at once with workers copy
// workers: its reader and writer pools, and binlog capture's replication stream.
func Connections(workers int) int { return readerConns + writerConns(workers) + 1 }

// writerConns sizes the writer pool for a copy of workers chunks at once: the chunks, the copy's
// bound and lock-wait queries, its stage session, replay (or trigger capture's syncs) and
// verification's chunk bounds.
func writerConns(workers int) int { return max(workers, 2) + 4 }

// Copy copies the source from the row after resumeAfter (nil: from the start), pausing for wait
// (may be nil) before each chunk. Progress reports the copier's counters.
func (p *Pipeline) Copy(ctx context.Context, resumeAfter []any, wait copier.Waiter, cfg copier.Config) error {
	cfg.Mode = p.capture.CopyMode()
	cfg.Logger = p.cfg.Logger
	p.writer.SetMaxOpenConns(writerConns(cfg.Workers))
	c := copier.New(p.reader, p.writer, p.q, &p.order, wait, cfg, resumeAfter)
	p.order.copy.Store(c)
	return p.Do(ctx, c.Run)
}

// CatchUp returns once the target holds every change committed before the call.
func (p *Pipeline) CatchUp(ctx context.Context) error {
	return p.Do(ctx, func(ctx context.Context) error {
		_, err := p.capture.WaitFor(ctx, p.cfg.DB, HeldNone)
		return err
	})
}

// WaitFor returns once the target holds every change committed before the call, read on conn,
// which holds the source and the sentry locked with SwapLockWith's tables (cutover.Target), and
// the capture's Position standing for that moment, as text.
func (p *Pipeline) WaitFor(ctx context.Context, conn *sql.Conn) (string, error) {
	pos, err := p.waitFor(ctx, conn, HeldForSwap)
	return string(pos), err
}

func (p *Pipeline) waitFor(ctx context.Context, conn *sql.Conn, held Held) (Position, error) {
	var pos Position
	err := p.Do(ctx, func(ctx context.Context) (err error) {
		pos, err = p.capture.WaitFor(ctx, conn, held)
		return err
	})
	return pos, err
}

// SwapLockWith lists the tables (with their lock type) the cut-over must lock with the source
// and the sentry (cutover.Swap.LockWith).
func (p *Pipeline) SwapLockWith() []string { return p.capture.LockWith(HeldForSwap) }

// Hold keeps the capture from writing to the target on its own until Release, waiting for a
// write in flight: a cut-over attempt holds it before it locks the tables (cutover.Target),
// because a write of the capture's that waits for the source's lock would hold up the attempt's
// own (Capture.WaitFor with HeldForSwap then brings the target up to date).
func (p *Pipeline) Hold() { p.capture.Hold() }

// Release ends a Hold; after a swap that went through there is nothing to release (Stop).
func (p *Pipeline) Release() { p.capture.Release() }

// verifyTarget is the pipeline as verification sees it: its sessions hold the source READ-locked.
type verifyTarget struct{ p *Pipeline }

func (v verifyTarget) WaitFor(ctx context.Context, conn *sql.Conn) error {
	_, err := v.p.waitFor(ctx, conn, HeldForVerify)
	return err
}

func (v verifyTarget) WaitUnlocked(ctx context.Context, conn *sql.Conn) error {
	_, err := v.p.waitFor(ctx, conn, HeldNone)
	return err
}

// Exclusive holds off the index build too: a repair locks the source with the target, and
// waiting for the target behind the build's metadata lock would hold the source's lock meanwhile.
func (v verifyTarget) Exclusive(fn func() error) error {
	v.p.ddl.Lock()
	defer v.p.ddl.Unlock()
	return v.p.Exclusive(fn)
}

// Mark stops replay at the moment conn's lock of the source stands for, where the capture can
// (binlog capture); a zero Mark where it cannot.
func (v verifyTarget) Mark(ctx context.Context, conn *sql.Conn) (verify.Mark, error) {
	bc, ok := v.p.capture.(barrierCapture)
	if !ok {
		return verify.Mark{}, nil
	}
	pos, lift, err := bc.Barrier(ctx, conn)
	if err != nil {
		return verify.Mark{}, err
	}
	reached := func(ctx context.Context) error {
		return v.p.Do(ctx, func(ctx context.Context) error { return bc.Reached(ctx, pos) })
	}
	return verify.Mark{Reached: reached, Lift: lift}, nil
}

// Hold keeps replay where it is while fn runs; the copy is over by verification's time.
func (v verifyTarget) Hold(fn func() error) error { return v.p.order.Exclusive(fn) }

// Exclusive runs fn while no chunk is in flight and no captured change is being applied.
func (p *Pipeline) Exclusive(fn func() error) error { return p.order.Exclusive(fn) }

// Build runs build (an index build on the target, in a session of the caller's) while capture
// continues: binlog capture's replay goes on, and waits for the target's metadata lock if the
// build holds one against writes; trigger capture's own syncs are held, because each would wait
// for that lock while holding the source's.
func (p *Pipeline) Build(ctx context.Context, build func(ctx context.Context) error) error {
	p.ddl.Lock()
	defer p.ddl.Unlock()
	p.capture.Hold()
	defer p.capture.Release()
	return p.Do(ctx, build)
}

// StartVerify starts Verify in the background once the copy is done, so that it runs beside the
// index build (Build); Verify then waits for its result. The build's sort holds one core and leaves
// the other to verification. Following the copy instead, range by range, is slower: the copy and
// the replay of its own binlog events already keep two cores busy (docs/bench/constants.md, "Measurements
// behind the code's constants"). It returns false when the capture
// must lock the target with the source to catch up (trigger capture): that lock would wait for
// the whole build while holding the source's.
func (p *Pipeline) StartVerify(ctx context.Context, pace copier.Pace) bool {
	if len(p.capture.LockWith(HeldForVerify)) > 0 || p.early != nil {
		return false
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &early{done: make(chan struct{}), cancel: cancel}
	p.early = e
	go func() {
		defer close(e.done)
		e.res, e.err = p.verify(ctx, pace)
	}()
	return true
}

// Verify compares source and target chunk by chunk, with the copy's chunking, repairing ranges
// that differ; after StartVerify, it waits for that verification instead.
func (p *Pipeline) Verify(ctx context.Context, pace copier.Pace) (verify.Result, error) {
	e := p.early
	if e == nil {
		return p.verify(ctx, pace)
	}
	var res verify.Result
	err := p.Do(ctx, func(ctx context.Context) error {
		select {
		case <-e.done:
			res = e.res
			return e.err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return res, err
}

func (p *Pipeline) verify(ctx context.Context, pace copier.Pace) (verify.Result, error) {
	return p.walkVerify(ctx, pace, &p.verified, nil)
}

// Sample verifies the copied range from the table's start, up to sample's bounds, while the copy
// waits between two chunks (its caller's Waiter holds it): the time it takes is verification's
// cost at this moment of the application's load, which the whole run's ETA counts (package
// migration). The caller keeps sample.Rows to a small share of the rows copied, so that the sample
// compares only what the copy has written; a range that differs is recopied, as in Verify.
func (p *Pipeline) Sample(ctx context.Context, pace copier.Pace, sample verify.Sample) (verify.Result, error) {
	// Chunks of a sixteenth of the sample at most: the first would otherwise be as large as the
	// copy's last, which may pass what the sample may compare, and a few chunks tell little.
	pace.MaxChunk = max(int(sample.Rows/16), 1)
	return p.walkVerify(ctx, pace, nil, &sample)
}

// walkVerify runs verification with the pipeline's configuration, counting into rows (if set).
func (p *Pipeline) walkVerify(ctx context.Context, pace copier.Pace, rows *atomic.Int64, sample *verify.Sample) (verify.Result, error) {
	if c := p.order.copy.Load(); c != nil && pace.FirstChunk == 0 {
		pace.FirstChunk, pace.FirstTarget = int(c.ChunkSize()), c.ChunkSizedFor()
	}
	if pace.MaxChunk == 0 {
		pace.MaxChunk = verifyMaxChunk
	}
	if _, marks := p.capture.(barrierCapture); pace.Room != nil && (!marks || faultsOf(ctx).VerifyRelease() == forceNever) {
		pace.Room = unbounded{pace.Room}
	}
	var res verify.Result
	err := p.Do(ctx, func(ctx context.Context) (err error) {
		res, err = verify.Run(ctx, p.cfg.DB, p.q, copier.NewChunker(p.writer, p.q, pace), verifyTarget{p},
			verify.Config{Logger: p.cfg.Logger, Wait: p.cfg.Hold, Rows: rows, Sample: sample, LockWith: p.capture.LockWith(HeldForVerify), TargetApart: p.cfg.Galera && p.cfg.Mode == Triggers, NoRepair: p.cfg.Galera})
		return err
	})
	return res, err
}

// unbounded is the pace's Room for verification where the capture cannot mark the target (trigger
// capture, and a test's release forced Never, which does not use the mark), without the latency target's bound on a chunk's lock: a chunk holds the source while
// the shadow catches up (its patience) whatever its rows, so shorter checksums only multiplied the
// chunks, each paying its own catch-up (a resumed verification under writers: 251 chunks and 231
// retries behind the shadow in 43 s, against 70-100 chunks in 1.5-6 s unbounded). Its locks stay
// those of the pace's levels and patience, and are still reported to the Room (Held): the latency
// target tells the reads that waited for them from those slowed by something else. Where the
// capture marks (binlog capture), a chunk's lock is the source's checksum alone and takes the
// bound (docs/bench/applybench.md, "The latency target against gh-ost": verification's writes
// p99 14-15 ms -> 5-6 ms at 25 % load).
type unbounded struct{ copier.Room }

func (unbounded) LockBound() time.Duration { return 0 }

func (u unbounded) Held(from, to time.Time) {
	if r, ok := u.Room.(copier.LockReporter); ok {
		r.Held(from, to)
	}
}

// Reconcile brings up to date a target the capture did not follow until now (a rollback's kept
// original): a capture that replays history from Config.Start catches up; one that starts now
// (triggers) has no record of earlier changes, so the whole target is verified against the
// source, recopying the ranges that differ. It returns that verification's result, if any.
func (p *Pipeline) Reconcile(ctx context.Context, pace copier.Pace) (*verify.Result, error) {
	if k, _ := kindOf(p.cfg.Mode); k.needsStart() {
		return nil, p.CatchUp(ctx)
	}
	v, err := p.Verify(ctx, pace)
	return &v, err
}

// Remove drops what the capture's set-up installed on the server: once the swap went through
// (the capture's triggers left with the original), or when the target is given up.
func (p *Pipeline) Remove(ctx context.Context) error {
	k, err := kindOf(p.cfg.Mode)
	if err != nil {
		return err
	}
	return k.remove(ctx, p.cfg)
}

// Stop ends capture and waits until no batch is being written: a late write of an old batch
// would land after whatever runs next (a resumed run, a cleanup). It returns the capture's error.
func (p *Pipeline) Stop() error {
	p.mu.Lock()
	stopped := p.stopped
	p.stopped = true
	p.mu.Unlock()
	if !stopped {
		if e := p.early; e != nil {
			e.cancel() // its repairs write to the target: none may land after Stop
			<-e.done
		}
		p.stop()
		p.group.Wait()
		p.capture.Close()
	}
	return p.Failure()
}

// StopAfterSwap stops capture once the target has been swapped in. Capture may already have
// ended by then, on the swap's own RENAME (DDL on the source) or on the target's name being gone:
// that is the expected end, not a failure, so it is only logged at debug level.
func (p *Pipeline) StopAfterSwap() {
	if err := p.Stop(); err != nil {
		p.cfg.Logger.Debug("capture ended at the swap", "error", err)
	}
}

// Close stops capture and releases the connections.
func (p *Pipeline) Close() error {
	err := p.Stop()
	p.closePools()
	return err
}

func (p *Pipeline) closePools() {
	for _, db := range []*sql.DB{p.reader, p.writer} {
		if db != nil {
			db.Close()
		}
	}
}
