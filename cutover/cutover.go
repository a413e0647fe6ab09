// Package cutover swaps the shadow table in for the original atomically (the sentry method), with
// a bounded lock budget and retries, and swaps back the same way for a rollback.
package cutover

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/go-sql-driver/mysql"
)

// SentryComment marks the placeholder table so cleanup only ever drops a table enginemig made.
const SentryComment = "enginemig cut-over sentry"

// Config bounds how much the application may feel the cut-over.
type Config struct {
	// LockWait is how long LOCK TABLES may queue. While it queues, the application's new queries
	// on the table queue behind it, so this is the stall budget of a failed attempt.
	LockWait time.Duration
	// CatchUp is how long the lock may be held while replay applies the last changes.
	CatchUp time.Duration
	// Timeout bounds the whole cut-over, waits for long statements included: attempts are
	// retried (Backoff, doubling up to 8× its start) until it passes, then Run returns ErrGaveUp
	// with the original in place (0: no limit). Attempts, when above 0, bounds the attempts too.
	Timeout  time.Duration
	Attempts int
	Backoff  time.Duration
	// LongQuery: queries on the table running longer than this make an attempt wait, because a
	// lock request queued behind them would block every new query until they finish.
	LongQuery time.Duration
	// SnapshotWait: before the swap of an InnoDB table, each transaction that began before the
	// cut-over is waited for until it ends or has been open this long (snapshots.go; 0: none).
	SnapshotWait time.Duration
	// Logger receives notable events (attempt failed, waiting for a query); nil discards them.
	Logger *slog.Logger
	// Observer, when set, is told of waits before an attempt and of each attempt's end, for the
	// runner's status and metrics.
	Observer Observer
	// Galera swaps without a sentry, in a way that cannot wedge a Galera node (attemptGalera).
	Galera bool
}

// Observer watches the cut-over from the runner.
type Observer interface {
	// Waiting starts a wait (long queries on the table); update changes what it waits on, done
	// ends it.
	Waiting(w lockwait.Wait) (update func(what string, blockers []lockwait.Session), done func())
	// Attempted reports the end of an attempt: err is nil when the swap went through, and held
	// is how long it kept the table locked.
	Attempted(attempt int, held time.Duration, err error)
}

// ErrLockNotGranted marks an attempt whose table lock was not granted within LockWait.
var ErrLockNotGranted = errors.New("lock not granted in time")

// DefaultTimeout is how long the cut-over keeps trying by default: a finished copy is worth
// waiting for, and a failed attempt costs the application at most LockWait.
const DefaultTimeout = time.Hour

// DefaultSnapshotWait is the age up to which a transaction open since before the cut-over is
// waited for: far longer than a web request's transaction, short enough that one left open for
// good costs each table of a whole-database run no more than this.
const DefaultSnapshotWait = 10 * time.Second

// DefaultConfig keeps each attempt's stall to a few hundred milliseconds.
func DefaultConfig() Config {
	return Config{LockWait: 300 * time.Millisecond, CatchUp: 500 * time.Millisecond, Timeout: DefaultTimeout,
		Backoff: 500 * time.Millisecond, LongQuery: 200 * time.Millisecond, SnapshotWait: DefaultSnapshotWait}
}

// Target is what the swap needs from whatever keeps To current (package shadow).
type Target interface {
	// Hold keeps the capture from writing to To on its own from before an attempt locks the
	// tables (such a write waiting for From's lock would hold up the attempt's LOCK TABLES);
	// Release ends it after an attempt that failed. WaitFor still brings To up to date.
	Hold()
	Release()
	// WaitFor returns once To holds every change committed before it was called, and the
	// capture's position for that moment, spelled by the capture ("" when it has none): where a
	// rollback's capture starts. conn holds From locked meanwhile.
	WaitFor(ctx context.Context, conn *sql.Conn) (string, error)
}

// failer is a Target that can fail for good (a capture that stopped): its Failure is then not
// nil, and the cut-over ends instead of retrying what cannot succeed.
type failer interface{ Failure() error }

// Recorder runs under the lock, once To has caught up and before the rename: it durably notes
// the swap's position (should the process die right after the rename, the next run still knows
// where a rollback must replay from) and may prepare To (its triggers). An error wrapping ErrAbort
// ends the cut-over; any other fails this attempt only.
type Recorder interface {
	RecordSwap(ctx context.Context, pos string) error
}

// Preparer, when a Recorder also implements it, readies To before each attempt takes the lock
// (work that would otherwise lengthen the application's stall), and undoes that after an attempt
// that failed. An error wrapping ErrAbort ends the cut-over.
type Preparer interface {
	PrepareSwap(ctx context.Context) error
	AbandonSwap(ctx context.Context)
}

// ErrAbort, wrapped in a Recorder's error, stops the cut-over instead of retrying.
var ErrAbort = errors.New("cut-over aborted")

// Swap describes one rename: From becomes Aside, To becomes From. For a migration From is the
// original table, To the shadow `_t_new`, Aside `_t_old`; for a rollback To is `_t_old` and Aside
// a name for the InnoDB table. Sentry is the placeholder (see table.SwapName): the swap renames
// From to Sentry, then Sentry to Aside.
type Swap struct {
	Schema string
	From   string
	To     string
	Aside  string
	Sentry string
	// LockWith is locked with From and the sentry (shadow.Pipeline.SwapLockWith): what
	// Target.WaitFor reads under the lock (trigger capture's change log). Never To: the rename
	// takes its metadata locks in name order, and must queue on From (see table.SwapName).
	LockWith []string
	// Gate and Gone, on a Galera node, make the swap the gated one (attemptGaleraGate): the
	// empty table Gate is renamed to Gone in the same RENAME, and its lock sorts first.
	Gate, Gone string
}

// Result reports what the swap cost.
type Result struct {
	// Position is the capture's position read under the lock: no change of From is after it.
	Position string        `json:"capture_position,omitempty"`
	Attempts int           `json:"attempts"`
	LockHeld time.Duration `json:"lock_held_ns"` // the longest the application was blocked by the final attempt
}

// ErrGaveUp means the cut-over stopped trying (Config.Timeout or Attempts); the original table
// is untouched and To is as current as capture kept it.
var ErrGaveUp = errors.New("cut-over gave up")

// Run performs the swap. rec (may be nil) is called while the tables are locked and To has caught
// up; it must not touch From or Aside. Failed attempts are retried until cfg.Timeout; meanwhile
// the Observer is told what blocks the swap.
func Run(ctx context.Context, db *sql.DB, sw Swap, target Target, cfg Config, rec Recorder) (Result, error) {
	if cfg.Logger == nil {
		cfg.Logger = dbconn.Logger(nil)
	}
	var res Result
	backoff := cfg.Backoff
	var lastErr error
	lim := newLimit(cfg)
	retry := &retries{cfg: cfg, lim: lim}
	defer retry.end()
	if sw.Gate != "" {
		defer dropGates(context.WithoutCancel(ctx), db, sw, cfg.Logger)
	}
	if err := waitForOlderSnapshots(ctx, db, sw, cfg, lim); err != nil {
		return res, err
	}
	for cfg.Attempts <= 0 || res.Attempts < cfg.Attempts {
		if lim.passed() {
			break
		}
		res.Attempts++
		if err := waitForLongQueries(ctx, db, sw, cfg, lim); err != nil {
			return res, err
		}
		held, pos, err := prepared(ctx, rec, target, func() (time.Duration, string, error) {
			if cfg.Galera && sw.Gate != "" {
				return attemptGaleraGate(ctx, db, sw, target, cfg, rec)
			} else if cfg.Galera {
				return attemptGalera(ctx, db, sw, target, cfg, rec)
			}
			return attempt(ctx, db, sw, target, cfg, rec)
		})
		if cfg.Observer != nil {
			cfg.Observer.Attempted(res.Attempts, held, err)
		}
		if err == nil && cfg.Galera { // renamed straight to Aside
			res.Position, res.LockHeld = pos, held
			return res, nil
		}
		if err == nil {
			res.Position, res.LockHeld = pos, held
			// Out of the application's way now: move the original from the sentry's name to
			// its kept name. Retried, because failing here leaves it under the sentry name.
			var rerr error
			for i := 0; i < 5; i++ {
				if _, rerr = db.ExecContext(context.WithoutCancel(ctx), table.RenameTable(sw.Schema, sw.Sentry, sw.Aside)); rerr == nil {
					return res, nil
				}
				time.Sleep(200 * time.Millisecond)
			}
			return res, &SwappedError{Err: fmt.Errorf("swap done, but the original stays as %s: rename to %s failed: %w", sw.Sentry, sw.Aside, rerr)}
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		var fatal *fatalError
		if errors.As(err, &fatal) {
			return res, fatal.err
		}
		if dbconn.IsInterruptedWrite(err) {
			return res, err // another attempt would go on as if nothing had happened (dbconn.ExecWhole)
		}
		if swapped := (*SwappedError)(nil); errors.As(err, &swapped) {
			return res, err
		}
		if f, ok := target.(failer); ok && f.Failure() != nil {
			return res, fmt.Errorf("%s can no longer be kept current: %w", sw.To, f.Failure())
		}
		lastErr = err
		cfg.Logger.Warn("cut-over attempt failed; original table left in place", "attempt", res.Attempts, "error", err, "next_in", backoff, "gives_up_in", lim.left().Round(time.Second))
		retry.failed(res.Attempts, err, backoff)
		select {
		case <-time.After(min(backoff, lim.left())):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		backoff = min(backoff*2, cfg.Backoff*8)
	}
	return res, fmt.Errorf("%w after %d attempts in %s (last: %v); the original table is in place", ErrGaveUp, res.Attempts, lim.elapsed().Round(time.Second), lastErr)
}

// prepared runs one attempt between the Recorder's PrepareSwap and the target's Hold and, when it
// fails, the target's Release and AbandonSwap.
func prepared(ctx context.Context, rec Recorder, target Target, attempt func() (time.Duration, string, error)) (time.Duration, string, error) {
	p, ok := rec.(Preparer)
	if ok {
		if err := p.PrepareSwap(ctx); err != nil {
			if errors.Is(err, ErrAbort) {
				return 0, "", &fatalError{err}
			}
			return 0, "", fmt.Errorf("prepare the swap: %w", err)
		}
	}
	target.Hold() // a swap that goes through ends the capture: nothing to release then
	held, pos, err := attempt()
	if swapped := (*SwappedError)(nil); err != nil && !errors.As(err, &swapped) {
		target.Release()
		if ok {
			p.AbandonSwap(context.WithoutCancel(ctx))
		}
	}
	return held, pos, err
}

// SwappedError means the swap itself succeeded but a follow-up step failed.
type SwappedError struct{ Err error }

func (e *SwappedError) Error() string { return e.Err.Error() }
func (e *SwappedError) Unwrap() error { return e.Err }

// fatalError stops retrying (e.g. a table that should not exist does).
type fatalError struct{ err error }

func (f *fatalError) Error() string { return f.err.Error() }

func attempt(ctx context.Context, db *sql.DB, sw Swap, target Target, cfg Config, rec Recorder) (time.Duration, string, error) {
	from := dbconn.QualifiedName(sw.Schema, sw.From)
	aside := dbconn.QualifiedName(sw.Schema, sw.Sentry)

	connA, err := db.Conn(ctx)
	if err != nil {
		return 0, "", err
	}
	defer connA.Close()
	// connA's session gets lock_wait_timeout=1 below: it must not go back to the pool with it,
	// where the next statement (a trigger DDL, an index build) would inherit a 1 s lock budget.
	defer connA.Raw(func(any) error { return driver.ErrBadConn })
	var idA int64
	if err := connA.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&idA); err != nil {
		return 0, "", err
	}
	// Opened before the lock: the lock's hold time is the application's stall.
	probe, err := newQueueProbe(ctx, db, sw)
	if err != nil {
		return 0, "", err
	}
	defer probe.close()
	if err := createSentry(ctx, connA, sw); err != nil {
		return 0, "", err
	}
	sentryDropped := false
	defer func() {
		if !sentryDropped {
			dropSentry(context.WithoutCancel(ctx), db, sw.Schema, sw.Sentry, lockSessionLimit(cfg)+time.Second)
		}
	}()
	if err := prepareLockSession(ctx, connA, cfg); err != nil {
		return 0, "", err
	}

	lock := fmt.Sprintf("LOCK TABLES %s WRITE, %s WRITE", from, aside)
	for _, l := range sw.LockWith {
		lock += ", " + l
	}
	if err := lockTables(ctx, db, connA, idA, lock, cfg.LockWait, lockwait.Table{Schema: sw.Schema, Name: sw.From}); err != nil {
		err = fmt.Errorf("lock %s: %w", from, err)
		if me := (*mysql.MySQLError)(nil); errors.As(err, &me) && me.Number == errGTIDUnsafe {
			return 0, "", &fatalError{err} // the same on every attempt
		}
		return 0, "", err
	}
	locked := time.Now()
	unlock, pos, err := whileLocked(ctx, connA, sw, target, cfg, rec)
	defer unlock()
	if err != nil {
		return 0, pos, err
	}

	dropped, err := renameBehindLock(ctx, db, connA, idA, probe, sw, cfg, unlock)
	sentryDropped = dropped
	if err != nil {
		return 0, pos, err
	}
	return time.Since(locked), pos, nil
}

// errGTIDUnsafe is MySQL's ER_GTID_UNSAFE_NON_TRANSACTIONAL_TABLE (1785).
const errGTIDUnsafe = 1785

// createSentry creates the sentry, which occupies the name the original will be renamed to: should
// the lock holder die while the rename waits, the rename fails on "table exists" and nothing
// changes. It gets the engine of the table it is locked with. With enforce_gtid_consistency=ON
// (MySQL's default when GTIDs are on) a LOCK TABLES that write-locks a transactional and a
// non-transactional table in one statement fails with Error 1785, so a MyISAM sentry beside the
// InnoDB table (the rollback's swap back) could never be locked.
func createSentry(ctx context.Context, conn *sql.Conn, sw Swap) error {
	var engine sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		sw.Schema, sw.From).Scan(&engine); err != nil {
		return fmt.Errorf("engine of %s: %w", dbconn.QualifiedName(sw.Schema, sw.From), err)
	}
	if !plainWord(engine.String) {
		return &fatalError{fmt.Errorf("%s has engine %q: not a table enginemig can swap", dbconn.QualifiedName(sw.Schema, sw.From), engine.String)}
	}
	sentry := dbconn.QualifiedName(sw.Schema, sw.Sentry)
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (id INT) ENGINE=%s COMMENT=%s", sentry, engine.String, dbconn.QuoteString(SentryComment))); err != nil {
		return &fatalError{fmt.Errorf("create sentry %s: %w (a leftover from an earlier run? `enginemig cleanup` removes it)", sentry, err)}
	}
	return nil
}

// plainWord reports whether s is a non-empty run of letters, digits and underscores (an engine name).
func plainWord(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return s != ""
}

// renameBehindLock queues the rename behind the lock connA holds, then drops the sentry and
// unlocks, which lets the rename through. It reports whether the sentry was dropped.
func renameBehindLock(ctx context.Context, db *sql.DB, connA *sql.Conn, idA int64, probe *queueProbe, sw Swap, cfg Config, unlock func()) (bool, error) {
	connB, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer connB.Close()
	var idB int64
	if err := connB.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&idB); err != nil {
		return false, err
	}
	renameDone := make(chan error, 1)
	go func() {
		_, err := connB.ExecContext(context.WithoutCancel(ctx), table.RenameTables(sw.Schema, [2]string{sw.From, sw.Sentry}, [2]string{sw.To, sw.From}))
		renameDone <- err
	}()
	// The rename must be queued behind our lock before the sentry goes: its exclusive metadata
	// lock request then takes precedence over the application statements queued on the table,
	// so none of them can write to the original between UNLOCK and the rename.
	if err := waitUntilBlocked(ctx, db, idB, probe, renameDone, cfg.LockWait); err != nil {
		killQuery(db, idB)
		<-renameDone
		return false, err
	}
	if f := faultsOf(ctx).OnRenameQueued(); f != nil {
		f(idA)
	}
	if _, err := connA.ExecContext(ctx, table.DropTable(sw.Schema, sw.Sentry)); err != nil {
		killQuery(db, idB)
		<-renameDone
		return false, fmt.Errorf("drop sentry under lock: %w", err)
	}
	unlock()
	if err := <-renameDone; err != nil {
		// The sentry is gone, so only the rename can have made a table of its name.
		if renamedAnyway(ctx, db, sw.Schema, sw.Sentry, idB, err) {
			cfg.Logger.Warn("cut-over: the rename's answer was lost; the tables show it went through", "error", err)
			return true, nil
		}
		// Nothing was renamed (RENAME is atomic); the original is in place.
		return true, fmt.Errorf("rename: %w", err)
	}
	return true, nil
}

// waitForLongQueries waits (until the cut-over's limit) while a query that mentions the table has
// been running longer than cfg.LongQuery. The wait goes to the Observer, which reports it; without
// one it is logged here, at once and then every longQueryLogEvery.
func waitForLongQueries(ctx context.Context, db *sql.DB, sw Swap, cfg Config, lim limit) error {
	var update func(string, []lockwait.Session)
	var logged time.Time
	for {
		ids, err := LongQueries(ctx, db, sw.Schema, sw.From, cfg.LongQuery)
		if err != nil || len(ids) == 0 {
			return nil // the process list is advisory; the lock budget still protects the application
		}
		sessions, _ := lockwait.Sessions(ctx, db, ids)
		who := lockwait.Holders{Sessions: sessions, Certain: true}.String()
		if lim.passed() {
			return fmt.Errorf("%w after %s: statements on %s keep running longer than %s (--long-query): %s; the original table is in place", ErrGaveUp,
				lim.elapsed().Round(time.Second), sw.From, cfg.LongQuery, who)
		}
		what := fmt.Sprintf("%d statement(s) on %s running longer than %s (--long-query)%s", len(ids), sw.From, cfg.LongQuery, lim.says())
		switch {
		case update != nil:
			update(what, sessions)
		case cfg.Observer != nil:
			var done func()
			update, done = cfg.Observer.Waiting(lockwait.Wait{Kind: lockwait.KindLongQueries, What: what, Blockers: sessions, BlockersCertain: true, Timeout: lim.timeout})
			defer done()
		case time.Since(logged) >= longQueryLogEvery:
			cfg.Logger.Info("waiting for long-running queries before locking", "table", sw.From, "queries", who, "gives_up_in", lim.left().Round(time.Second))
			logged = time.Now()
		}
		select {
		case <-time.After(min(cfg.Backoff, 500*time.Millisecond, max(lim.left(), time.Millisecond))):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// longQueryLogEvery spaces the log lines of a wait for long queries (it is polled every 500 ms).
const longQueryLogEvery = 5 * time.Second

// dropSentry removes the sentry a failed attempt leaves, but only when it is recognisably ours and
// no rename of it is pending: a rename whose answer was lost with the network may still wait
// behind the lock's session (until the server ends that session, prepareLockSession), and must then
// fail on the sentry, not go through unwatched. Tried until wait has passed: a pooled connection
// may be one the network took.
func dropSentry(ctx context.Context, db *sql.DB, schema, name string, wait time.Duration) {
	for end := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		// Unreadable (MySQL's process list fails while any statement text is not UTF-8): as
		// before there was this check.
		var pending int
		db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE COMMAND <> 'Sleep' AND INFO LIKE 'RENAME TABLE%' AND INSTR(INFO, ?) > 0`, dbconn.QualifiedName(schema, name)).Scan(&pending)
		if pending == 0 {
			ours, err := isSentry(ctx, db, schema, name)
			switch {
			case err == nil && !ours:
				return // gone, or not ours
			case err == nil:
				if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+dbconn.QualifiedName(schema, name)); err == nil {
					return
				}
			}
		}
		if time.Now().After(end) {
			return
		}
	}
}
