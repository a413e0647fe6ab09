package lockwait

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
)

// How a run watches what it waits on. A statement of enginemig waiting for a lock is noticed by
// polling the process list (every pollEvery, once it has waited lockWaitSeen): copy and verify
// chunks hold the table for 15 ms at a time, so half a second of waiting is never the
// application's ordinary traffic but someone else's LOCK TABLES, long statement, open
// transaction or FLUSH. Each wait is logged at once, then every reportEvery while it lasts. One
// poll took 1.0 ms with 100 idle connections on the server (BenchmarkWaiting, 2 cores
// at load average 10): at four a second, under half a percent of one core.
const (
	pollEvery    = 250 * time.Millisecond
	lockWaitSeen = 500 * time.Millisecond
	reportEvery  = 10 * time.Second
	// endGrace: a connection that waits again this soon after its last wait is still in the same
	// wait (a copy whose every chunk queues behind the same holder), logged once, then every
	// reportEvery, and over once it has not waited for endGrace.
	endGrace = 3 * time.Second
	// DefaultTimeout bounds a lock wait nobody asked for (--lock-timeout): longer than the
	// report queries MyISAM tables usually carry, short enough that a forgotten LOCK TABLES or
	// an open transaction ends the run within the same shift, with the holder named.
	DefaultTimeout = 10 * time.Minute
)

// LockTimeoutError ends a migration whose statement waited for a lock longer than --lock-timeout.
type LockTimeoutError struct{ Wait Wait }

func (e *LockTimeoutError) Error() string {
	return fmt.Sprintf("waited %s (--lock-timeout) for a %s (statement: %s), %s", e.Wait.Timeout, e.Wait.What, e.Wait.Statement, blockedBy(e.Wait))
}

// remedy says how to get past the lock.
func (e *LockTimeoutError) remedy() string {
	// The same for apply and rollback: both are safe to run again.
	who := "the session holding it"
	if len(e.Wait.Blockers) > 0 {
		who = fmt.Sprintf("connection %d", e.Wait.Blockers[0].ID)
	}
	return fmt.Sprintf("end what %s does (a LOCK TABLES, a long statement or an open transaction on the table; KILL it if it is stuck), or raise --lock-timeout; then run the same command again", who)
}

func blockedBy(w Wait) string {
	h := Holders{Sessions: w.Blockers, Certain: w.BlockersCertain, Note: w.Note}
	return "held by " + h.String()
}

// Watcher is the one owner of what a run (apply or rollback) waits on: lock waits of its own statements (found here),
// and deliberate waits the code that waits reports with begin (long queries before the cut-over,
// the throttle, a postponed cut-over). It logs them, shows them in status and metrics, and ends
// the migration when a lock wait exceeds the lock timeout.
type Watcher struct {
	db      *sql.DB
	own     func(int64) bool
	tables  []Table
	log     *slog.Logger
	timeout time.Duration
	abort   context.CancelCauseFunc
	now     func() time.Time

	mu      sync.Mutex
	current map[string]*tracked
	// unchanged says what a lock timeout leaves as it was (apply and rollback differ), and
	// enforce whether that is still true: once the swap may have happened, a wait is reported
	// but never ended by the timeout (nil: always enforced).
	unchanged string
	enforce   func() bool
	disk      func() string
	seen      atomic.Int64 // lock waits seen, deliberate ones not counted
	timedOut  atomic.Pointer[LockTimeoutError]
}

type tracked struct {
	w        Wait
	reported time.Time
	lastSeen time.Time // when a lock wait was last seen waiting
}

// WatchConfig says whose waits a Watcher watches and what it does about them.
type WatchConfig struct {
	DB *sql.DB
	// Own tells the run's own server connections (dbconn.Config.IsOwn).
	Own func(int64) bool
	// Tables are the run's tables, the one it converts first.
	Tables []Table
	Logger *slog.Logger // nil discards
	// Timeout ends the run when one of its statements waited this long for a lock
	// (DefaultTimeout when 0); Abort is how.
	Timeout time.Duration
	Abort   context.CancelCauseFunc
	// Unchanged says what a lock timeout leaves as it was, Enforce whether that is still true
	// (nil: always), as on Watcher.
	Unchanged string
	Enforce   func() bool
	// Disk, when set, says why the server's disk is short or full ("" when it is not): a holder
	// stuck writing while it is (in "Writing to binlog", say) waits for the disk, and the wait is
	// reported as the disk's.
	Disk func() string
}

// TablesOf names the tables of schema.
func TablesOf(schema string, names []string) []Table {
	out := make([]Table, len(names))
	for i, n := range names {
		out[i] = Table{Schema: schema, Name: n}
	}
	return out
}

// TimeoutOr is the lock timeout a run keeps: t, or DefaultTimeout when t is 0 (not set).
func TimeoutOr(t time.Duration) time.Duration {
	if t <= 0 {
		return DefaultTimeout
	}
	return t
}

// NewWatcher watches as cfg says, from Start on.
func NewWatcher(cfg WatchConfig) *Watcher {
	cfg.Timeout = TimeoutOr(cfg.Timeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{db: cfg.DB, own: cfg.Own, tables: cfg.Tables, log: cfg.Logger, timeout: cfg.Timeout, abort: cfg.Abort,
		now: time.Now, current: map[string]*tracked{}, unchanged: cfg.Unchanged, enforce: cfg.Enforce, disk: cfg.Disk}
}

// Table is the table the run converts.
func (w *Watcher) Table() Table { return w.tables[0] }

// Seen counts the lock waits seen so far (deliberate waits not counted).
func (w *Watcher) Seen() int64 { return w.seen.Load() }

// CountLockWait counts a lock wait the code that waited saw itself (a cut-over's lock not granted).
func (w *Watcher) CountLockWait() { w.seen.Add(1) }

// Start polls until the returned stop is called; stop returns once the last poll (which logs
// the end of a wait that ended meanwhile) is done.
func (w *Watcher) Start(ctx context.Context, extra func(now time.Time)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, extra)
	}()
	return func() { cancel(); <-done }
}

// run polls until ctx ends.
func (w *Watcher) run(ctx context.Context, extra func(now time.Time)) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// A wait that ended since the last poll still gets its end logged.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			w.pollLocks(last, true)
			cancel()
			return
		case <-tick.C:
		}
		w.pollLocks(ctx, false)
		if extra != nil {
			extra(w.now())
		}
		w.remind()
	}
}

// pollLocks finds this migration's statements waiting for a lock, starts or refreshes their
// entries, ends those no longer waiting, and enforces the lock timeout.
func (w *Watcher) pollLocks(ctx context.Context, final bool) {
	sessions, err := Waiting(ctx, w.db, w.own, lockWaitSeen)
	if err != nil {
		return // the process list is advisory: a migration is not stopped for want of it
	}
	waiting := map[string]bool{}
	for _, s := range sessions {
		// A statement naming none of the tables is another migration's of this process, unless
		// it waits for a backup's global read lock: that one holds up this run too, and its
		// state-table writes name no table of it.
		if !s.Mentions(w.tables) && !IsGlobalLockState(s.State) {
			continue
		}
		key := fmt.Sprintf("lock/%d", s.ID)
		waiting[key] = true
		w.lockWait(ctx, key, s)
	}
	w.mu.Lock()
	var ended []*tracked
	now := w.now()
	for key, t := range w.current {
		if t.w.Kind == KindLock && !waiting[key] && (final || now.Sub(t.lastSeen) >= endGrace) {
			ended = append(ended, t)
			delete(w.current, key)
		}
	}
	w.mu.Unlock()
	for _, e := range ended {
		w.log.Info("lock wait over", "on", e.w.What, "waited", e.lastSeen.Sub(e.w.Since).Round(time.Millisecond), "connection", e.w.Waiter)
	}
}

func (w *Watcher) lockWait(ctx context.Context, key string, s Session) {
	now := w.now()
	w.mu.Lock()
	t, known := w.current[key]
	if known {
		t.lastSeen = now // a later statement of the same connection within endGrace: the same wait
	}
	w.mu.Unlock()
	if known && now.Sub(t.reported) < reportEvery && s.Time < w.timeout {
		return
	}
	h := FindHolders(ctx, w.db, s, w.tables, w.own)
	since := now.Add(-s.Time)
	if known {
		since = t.w.Since
	}
	wt := Wait{Kind: KindLock, What: lockName(s), Statement: s.Info, Since: since, Waited: now.Sub(since), Waiter: s.ID,
		Blockers: h.Sessions, BlockersCertain: h.Certain, Timeout: w.timeout}
	if !h.Certain {
		wt.Note = h.Note
	}
	if disk := w.diskHolding(h.Sessions); disk != "" {
		wt.What, wt.Note = "disk space ("+lockName(s)+" held by a session that waits for the disk)", disk
	}
	w.mu.Lock()
	w.current[key] = &tracked{w: wt, reported: now, lastSeen: now}
	w.mu.Unlock()
	msg := "still waiting for a lock"
	if !known {
		w.seen.Add(1)
		msg = "waiting for a lock"
	}
	attrs := []any{"on", wt.What, "waited", wt.Waited.Round(100 * time.Millisecond), "blocked_by", blockedBy(wt)[len("held by "):],
		"connection", s.ID, "statement", s.Info, "gives_up_after", w.timeout}
	if strings.HasPrefix(wt.What, "disk") {
		attrs = append(attrs, "disk", wt.Note)
	}
	w.log.Warn(msg, attrs...)
	if s.Time >= w.timeout && (w.enforce == nil || w.enforce()) {
		// In this order: whatever error the run then meets is reported as the timeout, and the
		// statement is gone from the server before the run can end (it would otherwise wait on
		// there, and run once the lock is released).
		lt := &LockTimeoutError{Wait: wt}
		w.timedOut.CompareAndSwap(nil, lt)
		killQuery(w.db, s.ID)
		w.abort(lt)
	}
}

// diskHolding says why the disk holds up the wait, or "": a holder in a state of a write waiting
// for space, or writing (its binlog, its rows) while the disk is short or full.
func (w *Watcher) diskHolding(holders []Session) string {
	if w.disk == nil {
		return ""
	}
	disk := w.disk()
	for _, h := range holders {
		st := strings.ToLower(h.State)
		if strings.Contains(st, "free space") || strings.Contains(st, "disk full") {
			if disk == "" {
				disk = "the server's disk is full"
			}
			return fmt.Sprintf("%s; connection %d is in %q", disk, h.ID, h.State)
		}
		if disk != "" && (strings.Contains(st, "writing") || strings.Contains(st, "binlog") || strings.Contains(st, "commit")) {
			return fmt.Sprintf("%s; connection %d is in %q", disk, h.ID, h.State)
		}
	}
	return ""
}

// lockName turns a waiting session's state into what it waits for.
func lockName(s Session) string {
	return strings.TrimPrefix(strings.TrimPrefix(s.State, "Waiting for "), "waiting for ")
}

func killQuery(db *sql.DB, id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db.ExecContext(ctx, table.KillQuery(id))
}

// Begin records a deliberate wait, logs it, and returns the function that ends it. Its What may
// change while it lasts (update).
func (w *Watcher) Begin(wt Wait) (update func(what string, blockers []Session), end func()) {
	key := wt.Kind
	now := w.now()
	if wt.Since.IsZero() {
		wt.Since = now
	}
	w.mu.Lock()
	w.current[key] = &tracked{w: wt, reported: now}
	w.mu.Unlock()
	w.log.Info("waiting: "+wt.Kind, waitAttrs(wt, now)...)
	update = func(what string, blockers []Session) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if t := w.current[key]; t != nil {
			t.w.What, t.w.Blockers = what, blockers
		}
	}
	end = func() {
		w.mu.Lock()
		t := w.current[key]
		delete(w.current, key)
		w.mu.Unlock()
		if t != nil {
			w.log.Info("wait over: "+wt.Kind, "waited", w.now().Sub(t.w.Since).Round(time.Millisecond))
		}
	}
	return update, end
}

func waitAttrs(wt Wait, now time.Time) []any {
	attrs := []any{"on", wt.What, "waited", now.Sub(wt.Since).Round(100 * time.Millisecond)}
	if len(wt.Blockers) > 0 {
		attrs = append(attrs, "blocked_by", blockedBy(wt)[len("held by "):])
	}
	return attrs
}

// remind logs deliberate waits again every reportEvery (lock waits are refreshed by pollLocks).
func (w *Watcher) remind() {
	now := w.now()
	var due []Wait
	w.mu.Lock()
	for _, t := range w.current {
		if t.w.Kind != KindLock && now.Sub(t.reported) >= reportEvery {
			t.reported = now
			due = append(due, t.w)
		}
	}
	w.mu.Unlock()
	for _, wt := range due {
		w.log.Info("still waiting: "+wt.Kind, waitAttrs(wt, now)...)
	}
}

// Snapshot lists the current waits, longest first, with Waited brought up to now.
func (w *Watcher) Snapshot() []Wait {
	now := w.now()
	w.mu.Lock()
	out := make([]Wait, 0, len(w.current))
	for _, t := range w.current {
		wt := t.w
		wt.Waited = now.Sub(wt.Since)
		out = append(out, wt)
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b Wait) int { return a.Since.Compare(b.Since) })
	return out
}

// TimeoutErr is the run's error once a lock wait exceeded the timeout, nil before.
func (w *Watcher) TimeoutErr() error {
	lt := w.timedOut.Load()
	if lt == nil {
		return nil
	}
	return outcome.New(outcome.FailedSafe, fmt.Errorf("%w; %s", lt, w.unchanged), lt.remedy())
}

// Summary is the longest current wait in a few words, for the progress line ("" when none).
func (w *Watcher) Summary() string {
	if w == nil {
		return ""
	}
	all := w.Snapshot()
	if len(all) == 0 {
		return ""
	}
	wt := all[0]
	out := fmt.Sprintf("%s for %s: %s", wt.Kind, wt.Waited.Round(time.Second), wt.What)
	if len(wt.Blockers) > 0 {
		out += ", " + blockedBy(wt)
	}
	return out
}
