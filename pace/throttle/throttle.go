// Package throttle decides when the row copy must pause: while the primary is busy (Threads_running),
// while its disk is short of space (Config.Disk), while its share of the account's hourly statements is spent,
// outside its time window (Config.Window),
// while a replica lags (measured with a heartbeat enginemig writes), or while an operator paused it.
package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Defaults. A replica more than a second behind is already visible to applications that read from
// it; 250 ms heartbeats resolve lag well below that while costing the primary 4 tiny writes a second.
const (
	DefaultMaxLag          = time.Second
	DefaultInterval        = 250 * time.Millisecond
	DefaultHeartbeatSchema = "_enginemig"
	// minCheckTimeout bounds one status query: long enough for a busy server, short enough that
	// an unreachable replica turns into "cannot measure" quickly.
	minCheckTimeout = time.Second
)

// ErrStopped is returned by Wait after Stop: no more measurements arrive, so the copy must not go on
// believing the last ones.
var ErrStopped = errors.New("throttle: stopped")

// Config chooses what throttles the copy. The zero value throttles only on SetPaused.
type Config struct {
	// MaxThreadsRunning pauses the copy while SHOW GLOBAL STATUS Threads_running exceeds it; 0 is
	// off. The count includes the status query itself and enginemig's own running statements.
	MaxThreadsRunning int
	// Replicas are the replicas to watch, opened by the caller with SELECT on HeartbeatSchema.
	Replicas []*sql.DB
	// ReplicaNames name the replicas in messages (default replica1, replica2, ...).
	ReplicaNames []string
	// MaxLag pauses the copy while any replica lags more (DefaultMaxLag when Replicas are given).
	MaxLag time.Duration
	// HeartbeatSchema holds the heartbeat table on the primary; it must replicate to every
	// replica (DefaultHeartbeatSchema when empty). It is created if missing.
	HeartbeatSchema string
	// Interval is how often the heartbeat is written and the checks run (DefaultInterval).
	Interval time.Duration
	// Galera pauses the copy while Galera's flow control pauses the cluster the primary is a
	// node of (pace/throttle/galera.go).
	Galera bool
	// Disk, when set, holds the copy back while it reports low disk space (a diskspace.Watch,
	// which reads the file systems itself: the throttle only asks).
	Disk interface{ Low() (string, bool) }
	// Account, when set, holds the copy back while enginemig's share of the account's hourly
	// statement limit is spent (a dbconn.HourlyBudget).
	Account interface{ Low() (string, bool) }
	// Window, when set, holds the copy back outside the hours it may run (a window.Schedule:
	// reason key window). Nothing is measured for it, so while it is set the verdict is
	// re-evaluated every Interval: a window that opens releases the copy within one.
	Window interface{ Low() (string, bool) }
	// Logger receives a record whenever the throttle state changes (not on every check): Info when
	// the copy is throttled or resumes, Warn when it waits because something cannot be measured.
	// Nil discards.
	Logger *slog.Logger
}

// Throttler watches the primary and the replicas in the background; Wait only reads its cached
// verdict, so calling it before every chunk costs a mutex and some arithmetic.
type Throttler struct {
	primary *sql.DB
	cfg     Config

	mu         sync.Mutex
	starting   bool // Start was called
	started    bool // Start finished: measurements count
	stopped    bool
	paused     bool
	maxLag     time.Duration
	maxThreads int
	threads    sample // Threads_running
	flow       flowControl
	hb         heartbeat
	replicas   []replica
	stoppedErr *ReplicaStoppedError // a replica's SQL thread stopped on an error (Stopped)
	wake       chan struct{}        // closed and replaced whenever something Wait depends on changes
	lastKey    string               // what was last logged, to log changes only
	since      time.Time            // when the current throttled/unthrottled period began

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sample is one background measurement.
type sample struct {
	value int64
	err   error
	at    time.Time // when it was taken; zero before the first
}

type replica struct {
	name      string
	db        *sql.DB
	seq       sample  // heartbeat sequence number last seen on the replica
	threads   threads // its SQL thread, as last read (replicathreads.go)
	noThreads bool    // the account may not read them
}

// New prepares a throttler; Start begins the measurements.
func New(primary *sql.DB, cfg Config) *Throttler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.HeartbeatSchema == "" {
		cfg.HeartbeatSchema = DefaultHeartbeatSchema
	}
	if cfg.MaxLag <= 0 && len(cfg.Replicas) > 0 {
		cfg.MaxLag = DefaultMaxLag
	}
	t := &Throttler{primary: primary, cfg: cfg, maxLag: cfg.MaxLag, maxThreads: cfg.MaxThreadsRunning,
		wake: make(chan struct{}), since: time.Now()}
	for i, db := range cfg.Replicas {
		name := fmt.Sprintf("replica%d", i+1)
		if i < len(cfg.ReplicaNames) && cfg.ReplicaNames[i] != "" {
			name = cfg.ReplicaNames[i]
		}
		t.replicas = append(t.replicas, replica{name: name, db: db})
	}
	t.hb.init(cfg.HeartbeatSchema)
	return t
}

// Start creates the heartbeat table when replicas are watched, writes the first heartbeat, and
// starts the background writer and checks, which run until Stop or until ctx ends. Until the
// first measurements arrive Wait blocks (nothing is known yet, so nothing is assumed).
func (t *Throttler) Start(ctx context.Context) error {
	t.mu.Lock()
	if t.starting {
		t.mu.Unlock()
		return errors.New("throttle: Start called twice")
	}
	t.starting = true
	t.mu.Unlock()
	if len(t.replicas) > 0 {
		if err := t.hb.setup(ctx, t.primary); err != nil {
			return err
		}
		t.mu.Lock()
		t.hb.recordWrite(1, nil, time.Now())
		t.mu.Unlock()
	}
	// A first round of measurements before the loops start, so the state (and the first log
	// line) reflects the servers rather than "nothing measured yet". The first heartbeat takes a
	// moment to replicate, so give each replica a short while to show it.
	t.checkThreads(ctx)
	if t.cfg.Galera {
		t.checkFlowControl(ctx)
	}
	for i := range t.replicas {
		deadline := time.Now().Add(t.checkTimeout())
		for {
			t.checkReplica(ctx, i)
			t.mu.Lock()
			ok := t.replicas[i].seq.err == nil
			t.mu.Unlock()
			if ok || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("throttle: start: %w", err)
	}
	t.record(func() { t.started = true })
	ctx, t.cancel = context.WithCancel(ctx)
	if len(t.replicas) > 0 {
		t.loop(ctx, t.writeHeartbeat)
		for i := range t.replicas {
			t.loop(ctx, func(ctx context.Context) { t.checkReplica(ctx, i) })
		}
	}
	// Threads_running is watched even while the limit is 0, so control can turn it on live.
	t.loop(ctx, t.checkThreads)
	if t.cfg.Galera {
		t.loop(ctx, t.checkFlowControl)
	}
	if t.cfg.Window != nil {
		t.loop(ctx, func(context.Context) { t.record(func() {}) })
	}
	return nil
}

// loop runs step now and then every Interval until ctx ends.
func (t *Throttler) loop(ctx context.Context, step func(context.Context)) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		tick := time.NewTicker(t.cfg.Interval)
		defer tick.Stop()
		for {
			step(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

func (t *Throttler) checkTimeout() time.Duration {
	return max(minCheckTimeout, 2*t.cfg.Interval)
}

// staleAfter is how old a measurement may be before it no longer counts: one missed check is
// normal jitter, a check that timed out is not.
func (t *Throttler) staleAfter() time.Duration {
	return t.checkTimeout() + 2*t.cfg.Interval
}

func (t *Throttler) checkThreads(ctx context.Context) {
	// On an account with hourly limits every statement counts against the application's own
	// (Config.Account): with no limit set, Threads_running is not read (it was 14,400 statements
	// an hour, more than the lock-wait poll; TestAccountLimitsKeepApplyWithin). A limit set live
	// is read from the next tick.
	if t.cfg.Account != nil && t.threadsLimit() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, t.checkTimeout())
	defer cancel()
	var name string
	var n int64
	err := t.primary.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_running'").Scan(&name, &n)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // stopping
	}
	t.record(func() { t.threads = sample{value: n, err: err, at: time.Now()} })
}

func (t *Throttler) threadsLimit() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxThreads
}

// record applies a measurement, re-evaluates (logging a change) and wakes waiters.
func (t *Throttler) record(apply func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	apply()
	t.evaluateLocked(time.Now())
	t.notifyLocked()
}

func (t *Throttler) notifyLocked() {
	close(t.wake)
	t.wake = make(chan struct{})
}

// Wait returns at once when the copy may proceed and otherwise blocks until it may, or until ctx
// ends (returning its error). It is meant as copier.Config.Throttle.
func (t *Throttler) Wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		if !t.started {
			t.mu.Unlock()
			return errors.New("throttle: Wait before Start")
		}
		if t.stopped {
			t.mu.Unlock()
			return ErrStopped
		}
		if t.stoppedErr != nil {
			err := t.stoppedErr
			t.mu.Unlock()
			return err
		}
		v := t.evaluateLocked(time.Now())
		wake := t.wake
		t.mu.Unlock()
		if !v.throttled {
			return ctx.Err()
		}
		// Lag only grows with time, so only a new measurement or setting can release the copy;
		// the timer is a safety net.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-time.After(t.cfg.Interval):
		}
	}
}

// SetPaused pauses (true) or resumes (false) the copy regardless of the measurements.
func (t *Throttler) SetPaused(p bool) { t.set(func() { t.paused = p }) }

// SetMaxLag changes the replica lag limit; values <= 0 restore DefaultMaxLag.
func (t *Throttler) SetMaxLag(d time.Duration) {
	if d <= 0 {
		d = DefaultMaxLag
	}
	t.set(func() { t.maxLag = d })
}

// SetMaxThreadsRunning changes the Threads_running limit; 0 turns the check off.
func (t *Throttler) SetMaxThreadsRunning(n int) { t.set(func() { t.maxThreads = max(n, 0) }) }

func (t *Throttler) set(apply func()) { t.record(apply) }

// Stop ends the background work and removes this process's heartbeat row. Wait returns ErrStopped
// afterwards.
func (t *Throttler) Stop() {
	t.mu.Lock()
	if t.stopped || !t.started {
		t.stopped = true
		t.mu.Unlock()
		return
	}
	t.stopped = true
	t.notifyLocked()
	t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
	if len(t.replicas) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), minCheckTimeout)
		defer cancel()
		t.hb.remove(ctx, t.primary)
	}
}
