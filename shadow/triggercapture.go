package shadow

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
)

// triggerCapture captures changes without a binlog: AFTER triggers on the source note each
// changed key in a MyISAM change log, and a sync brings those keys' current rows from the source
// into the target (table.CaptureSQL.Sync), then forgets the notes.
//
// Why notes and a sync rather than triggers that write the row into the InnoDB target directly
// (pt-online-schema-change's way): a MyISAM change is permanent at once, but a trigger's write to
// InnoDB belongs to the application's transaction. A ROLLBACK, or a multi-row statement that
// fails half-way, keeps the MyISAM change and undoes the target's, and an open
// transaction holds row locks on the target that the copy would wait on while holding the
// source's lock. A note in a MyISAM log is as permanent as the change it notes, and the
// application's statement gains one small MyISAM insert, with no InnoDB write or redo flush.
//
// A sync is correct because it reads the noted keys' current rows while the source is locked
// against writes (LOCK TABLES ... READ) and every change after that lock writes a new note: the
// last sync of a key sees its last change. For an InnoDB source (a rollback's capture) LOCK
// TABLES ... READ also waits until every transaction that wrote it has ended (they hold its
// metadata lock until then), so a change that is rolled back is never synced as if it had
// stayed; a MyISAM source has nothing to wait for (its changes are final at once, and MariaDB
// 10.11 does not make LOCK TABLES ... READ wait for them). Syncs run under the order's exclusive lock,
// like replay batches (rule 1), and never during an index build on the target (Pipeline.Build), whose
// metadata lock LOCK TABLES ... WRITE would queue behind while holding the source, nor while a
// cut-over attempt holds the tables (Hold).
type triggerCapture struct {
	c      *table.CaptureSQL
	q      *table.SQL
	db     *sql.DB // control pool: the syncs' locked sessions
	writer *sql.DB // row writer pool: the cut-over's sync writes through it
	order  *order
	locker *mdl.Locker // takes the syncs' locks (package mdl)
	every  time.Duration
	hold   copier.Waiter // Config.Hold: the periodic syncs wait for it (nil: never)
	log    *slog.Logger

	paused   atomic.Int32 // > 0: no periodic syncs (an index build, a cut-over attempt)
	inflight sync.Mutex   // held by a periodic sync while it runs
	synced   atomic.Int64 // syncs done
	notes    atomic.Int64 // notes synced
	behind   atomic.Bool  // the last periodic sync could not take its lock
	// handedOut: outside a lock, see whether there is anything to sync from the ids the log has
	// handed out (table.CaptureSQL.NotesHandedOut), not by reading the log (MariaDB).
	handedOut bool
	// galera: on a Galera node a sync's locked session holds no table that commits through the
	// cluster (triggercapture_galera.go); pending are the writes of a sync that stopped waiting
	// for them.
	galera  bool
	pendMu  sync.Mutex
	pending *writes
}

// noted reads how far the notes go outside any lock: the highest id handed out where the server
// allows it without locking the log, the newest note otherwise.
func (t *triggerCapture) noted(ctx context.Context, q dbconn.Querier) (int64, error) {
	query := t.c.LastNote()
	if t.handedOut {
		query = t.c.NotesHandedOut()
	}
	var n int64
	err := q.QueryRowContext(ctx, query).Scan(&n)
	return n, err
}

// allSynced records, under the sync's lock with the log found empty, that every id handed out so
// far is synced: handed-out ids whose notes are gone would otherwise look unsynced for ever.
func (t *triggerCapture) allSynced(ctx context.Context, q dbconn.Querier) error {
	n, err := t.noted(ctx, q)
	if err != nil {
		return err
	}
	for cur := t.notes.Load(); n > cur && !t.notes.CompareAndSwap(cur, n); cur = t.notes.Load() {
	}
	return nil
}

// syncLockWait bounds each LOCK TABLES of a periodic sync where the lock queues (mdl.Sync, on
// MySQL): while it waits (for a transaction that wrote the source to end), the application's new
// writes queue behind it. A sync that got no lock is tried again at the next tick.
const syncLockWait = 1

// Run syncs the notes every few hundred milliseconds, so that the final sync under the cut-over
// lock has little left to do.
func (t *triggerCapture) Run(ctx context.Context) error {
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// Held (the account's hourly statements spent), the notes wait in the log: the next
		// sync takes them in fewer, larger statements.
		if t.hold != nil && t.hold.Wait(ctx) != nil {
			return nil
		}
		for more := true; more; {
			var err error
			more, err = t.syncOwnLock(ctx, false)
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, errWritesPending):
				t.behind.Store(true)
				t.log.Info("trigger capture: a sync's writes waited (behind a DDL in total order?); its lock let go, the next sync takes its notes", "error", err)
			case retryLater(err):
				t.behind.Store(true)
				t.log.Debug("trigger capture: sync waited for the table; retrying", "error", err)
			case err != nil:
				return err
			default:
				t.behind.Store(more)
			}
			if more && !sleep(ctx, syncBreather) {
				return nil
			}
		}
	}
}

// sleep waits d, or until ctx ends (then it returns false).
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// WaitFor syncs every note written before the call, in q's locks (held) or, with HeldNone, in
// its own, retrying while a transaction keeps it waiting.
func (t *triggerCapture) WaitFor(ctx context.Context, q dbconn.Execer, held Held) (Position, error) {
	switch {
	case held == HeldForVerify && t.galera:
		return "", t.syncVerify(ctx, q)
	case held == HeldForVerify:
		// No order needed: q's lock on the target keeps every chunk's write out, and
		// verification comes after the copy. In batches, ctx's deadline (the chunk's patience)
		// looked at between them: a cancelled statement goes on in the server, holding the
		// source, until it ends, and one statement for a whole backlog (a rollback's first chunk
		// under writers that kept every periodic sync out) held it for seconds.
		for {
			more, err := t.syncLocked(ctx, q, syncMaxNotes)
			if err != nil || !more {
				return "", err
			}
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
	case held == HeldForSwap:
		return "", t.syncForSwap(ctx, q)
	}
	target, err := t.noted(ctx, t.db)
	if err != nil {
		return "", err
	}
	for t.notes.Load() < target {
		pause := syncBreather
		if _, err := t.syncOwnLock(ctx, true); retryLater(err) {
			pause = t.every
		} else if err != nil {
			return "", err
		}
		if !sleep(ctx, pause) {
			return "", ctx.Err()
		}
	}
	return "", nil
}

// syncOwnLock syncs the oldest syncMaxNotes notes in a session of its own, when there is anything
// to sync and (unless asked for) syncs are not paused. It reports whether more notes wait.
func (t *triggerCapture) syncOwnLock(ctx context.Context, asked bool) (more bool, err error) {
	t.inflight.Lock()
	defer t.inflight.Unlock()
	if !asked && t.paused.Load() > 0 {
		return false, nil
	}
	if last, err := t.noted(ctx, t.db); err != nil || last <= t.notes.Load() {
		return false, err
	}
	// Before the lock: off Galera the sync's lock holds the target, which pending writes (a
	// cut-over attempt's) need, and nothing can leave writes pending while inflight is held; a
	// Galera sync waits again under its lock (syncRead), where verification's sync can.
	if err := t.waitPending(ctx); err != nil {
		return false, err
	}
	if t.galera {
		// Only the source and the log, and other sessions write the target (triggercapture_galera.go).
		return t.syncUnder(ctx, t.c.LockSource(), t.syncRead)
	}
	return t.syncUnder(ctx, t.c.Lock(), func(ctx context.Context, q dbconn.Execer) (bool, error) {
		return t.syncLocked(ctx, q, syncMaxNotes)
	})
}

// syncUnder runs sync in a session of its own holding lock, in the chunks' order (Exclusive).
func (t *triggerCapture) syncUnder(ctx context.Context, lock string, sync func(context.Context, dbconn.Execer) (bool, error)) (more bool, err error) {
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	defer conn.Raw(func(any) error { return driver.ErrBadConn }) // a session that held LOCK TABLES and a short lock wait
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", syncLockWait)); err != nil {
		return false, err
	}
	err = t.order.Exclusive(func() error {
		if err := t.locker.Take(ctx, conn, mdl.Sync, lock); err != nil {
			return fmt.Errorf("trigger capture: %w", err)
		}
		if f := faultsOf(ctx).SyncLocked(); f != nil {
			f()
		}
		var err error
		more, err = sync(ctx, conn)
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); err == nil {
			err = uerr
		}
		return err
	})
	return more, err
}

// syncMaxNotes bounds the notes one sync of capture's own takes, and so how long it holds the
// source READ-locked: the application's writes wait meanwhile. A backlog synced at once (the
// copy's, before the index build) was the application's longest write stall; in batches with
// syncBreather between them the stall is about one batch (docs/bench/constants.md, "Measurements behind the
// code's constants").
const syncMaxNotes = 2000

// syncBreather is the pause between batches of a backlog, in which queued writes get the table.
const syncBreather = 20 * time.Millisecond

// Hold keeps periodic syncs off until Release, waiting for one in flight (and for the writes of
// one that stopped waiting for them) to end: an index build
// on the target, whose metadata lock a sync's LOCK TABLES ... WRITE would queue behind while
// holding the source, and a cut-over attempt, whose LOCK TABLES a sync waiting for the source
// would hold up. WaitFor's own syncs (asked for) still run.
func (t *triggerCapture) Hold() {
	t.paused.Add(1)
	t.inflight.Lock()
	t.inflight.Unlock() //lint:ignore SA2001 the lock only waits for the sync in flight, if any, to end
	t.waitPending(context.Background())
}

// Release ends one Hold.
func (t *triggerCapture) Release() { t.paused.Add(-1) }

// syncForSwap is the sync under the cut-over's lock. q holds the source and the log (READ), but
// not the target, so q reads the noted keys and their current rows, and another session writes
// them (syncNoted), within ctx (the catch-up's budget): past it, the attempt fails and lets its
// lock go, and the writes are pending for the next sync. The notes stay: the log goes with the
// swap.
func (t *triggerCapture) syncForSwap(ctx context.Context, q dbconn.Execer) error {
	if err := t.waitPending(ctx); err != nil {
		return err
	}
	var last int64
	if err := q.QueryRowContext(ctx, t.c.LastNote()).Scan(&last); err != nil || last == 0 {
		return err
	}
	return t.syncNoted(ctx, q, last)
}

// scanAll reads every row of a query, width values each, flattened. It prepares the query when
// q can: only the binary protocol returns FLOAT exactly (the text protocol prints 6 digits, and
// the converted table differed from the source in FLOAT columns until this was done).
func scanAll(ctx context.Context, q dbconn.Querier, query string, width int, args ...any) ([]any, error) {
	var rows *sql.Rows
	var err error
	if p, ok := q.(interface {
		PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	}); ok {
		st, perr := p.PrepareContext(ctx, query)
		if perr != nil {
			return nil, perr
		}
		defer st.Close()
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = q.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []any
	for rows.Next() {
		vals, err := dbconn.ScanValues(rows, width)
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
	}
	return out, rows.Err()
}

// writeBatches runs stmt(n) through the writer for flat, syncBatch rows of width values at a time.
// A batch is never cut off by ctx (only the next one is not started; dbconn.ExecWhole): besides
// the target (in a rollback MyISAM), the writer's session holds no table lock, so a batch the
// server kept running after the client gave up could land after a later attempt's newer rows, and
// the swap would then take the older ones.
func (t *triggerCapture) writeBatches(ctx context.Context, flat []any, width int, stmt func(n int) string) error {
	for len(flat) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(flat)/width, syncBatch)
		// Each batch is one autocommit statement that deletes or writes whole rows: rerun, it
		// does the same again, so a batch the cluster aborted runs again.
		if err := dbconn.RetryClusterAborts(ctx, func() error {
			_, err := dbconn.ExecWhole(ctx, t.writer, t.q.Target(), stmt(n), flat[:n*width]...)
			return err
		}); err != nil {
			return err
		}
		flat = flat[n*width:]
	}
	return nil
}

// syncBatch is how many rows one write of the cut-over's sync carries.
const syncBatch = 200

// syncLocked runs the sync statements in q, which holds the locks. The session is marked as
// enginemig's own while it writes, so stand-ins of carried triggers on the target stay silent
// without looking anything up.
// With limit > 0 it syncs at most the oldest limit notes, and reports whether more wait.
func (t *triggerCapture) syncLocked(ctx context.Context, q dbconn.Execer, limit int64) (more bool, err error) {
	var first, last int64
	if err := q.QueryRowContext(ctx, t.c.NoteRange()).Scan(&first, &last); err != nil {
		return false, err
	}
	if last == 0 {
		return false, t.allSynced(ctx, q)
	}
	if limit > 0 && last-first >= limit {
		last, more = first+limit-1, true
	}
	if _, err := q.ExecContext(ctx, "SET "+dbconn.OwnWriteVar+" = 1"); err != nil {
		return false, err
	}
	defer func() {
		if _, uerr := q.ExecContext(context.WithoutCancel(ctx), "SET "+dbconn.OwnWriteVar+" = NULL"); err == nil {
			err = uerr
		}
	}()
	if f := faultsOf(ctx).Synced(); f != nil {
		f(last - first + 1)
	}
	stmts, args := t.c.Sync(), [3][]any{{last}, {last}, {last}}
	switch all, hi := t.order.syncUpTo(); {
	case all:
	case hi == nil: // no chunk written yet: the copy reads every noted group
		stmts[0], stmts[1] = "", ""
	default:
		var hiArgs []any
		stmts, hiArgs = t.c.SyncUpTo(hi)
		args = [3][]any{append([]any{last}, hiArgs...), append([]any{last}, hiArgs...), {last}}
	}
	// Each statement writes a MyISAM table (the log; in a rollback the target too) and is never
	// interrupted (dbconn.ExecWhole): limit bounds it instead.
	written := [3]string{t.q.Target(), t.q.Target(), t.c.Log()}
	for i, stmt := range stmts {
		if stmt == "" {
			continue
		}
		if _, err := dbconn.ExecWhole(ctx, q, written[i], stmt, args[i]...); err != nil {
			return false, fmt.Errorf("trigger capture: sync: %w", err)
		}
	}
	t.synced.Add(1)
	t.notes.Store(last) // ids only grow: the last synced id counts the notes so far
	return more, nil
}

// LockWith is what verification (the target and the log, to sync under its lock) and the
// cut-over (the log, see syncForSwap) lock with the source.
// On a Galera node verification locks only the log with the source, and its sync has other
// sessions write the target (triggercapture_galera.go).
func (t *triggerCapture) LockWith(held Held) []string {
	if held == HeldForVerify && t.galera {
		return []string{t.c.Log() + " WRITE"}
	}
	if held == HeldForSwap {
		return t.c.SwapLockWith()
	}
	return t.c.LockWith()
}

// CopyMode is INSERT IGNORE: a row a sync wrote is at least as new as the copy's, and when the
// source changed after the sync, a note waits for the next one.
func (t *triggerCapture) CopyMode() table.WriteMode { return table.InsertIgnore }

// ResumeAt and Start are empty: the notes wait in the change log, whenever a run resumes.
func (t *triggerCapture) ResumeAt() Position { return "" }
func (t *triggerCapture) Start() Position    { return "" }

func (t *triggerCapture) Stats() Stats {
	return Stats{Changes: t.notes.Load(), Applied: t.synced.Load(), Behind: t.behind.Load()}
}

// Close leaves the triggers and the log in place: they keep capturing for a resumed run until
// the migration removes them (Remove).
func (t *triggerCapture) Close() {}

var _ Capture = (*triggerCapture)(nil)
