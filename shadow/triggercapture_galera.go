package shadow

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Trigger capture on a Galera node. There a DDL in total-order isolation (TOI) on a table, once
// ordered, waits for every session holding the table with LOCK TABLES (the cluster's brute-force
// abort spares explicit locks), and every later commit of the node waits for that DDL. A sync that
// committed its writes to the target while its session held LOCK TABLES on the source would
// therefore wedge the node as soon as a DDL on the source (the application's, another node's, a
// trigger's CREATE) was ordered meanwhile: the sync's commit would wait for the DDL, the DDL for
// the sync's lock. So on a Galera node a sync's locked session holds only MyISAM tables (the
// source READ, the log), which commit nothing through the cluster, and reads the noted keys and
// rows; another session writes them (as under the cut-over's lock, syncForSwap), and the locked
// session waits for those writes at most syncWriteWait (the cut-over: its catch-up budget). A
// sync whose writes did not end in time lets its lock go and keeps its notes; its writes become
// pending, and every later sync, and Hold, waits for them first, so they cannot land after newer
// rows without a note left to bring those back: a sync waits for them under its own lock
// (syncRead), since one that waited before it locked could meet writes made pending meanwhile by
// a sync that had the lock (verification's, which no Hold keeps off). Verification locks the log,
// not the target, with the source (LockWith): its sync is such a sync, and the target is
// checksummed in a session of its own (verify.Config.TargetApart).

// syncWriteWait bounds how long a sync's locked session waits for its writes on a Galera node
// (the application's writes to the source wait meanwhile).
const syncWriteWait = syncLockWait * time.Second

// errWritesPending: a sync's writes did not end within its wait; they go on, and its notes stay.
var errWritesPending = errors.New("trigger capture: the sync's writes did not end in time; its notes stay for the next sync")

// retryLater says a sync did nothing lasting and can run again later: it waited for a lock, or
// for its writes.
func retryLater(err error) bool {
	return dbconn.IsLockConflict(err) || errors.Is(err, errWritesPending)
}

// syncRead syncs the oldest syncMaxNotes notes with q holding the source and the log: it waits
// for an earlier sync's pending writes (at most syncWriteWait), reads the noted keys and rows, has
// the writer write them (waiting at most syncWriteWait again: the read runs within that budget,
// and one cut short would take q's session, and its lock, with it), and then forgets the notes.
func (t *triggerCapture) syncRead(ctx context.Context, q dbconn.Execer) (more bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, syncWriteWait)
	err = t.waitPending(pctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		return false, fmt.Errorf("%w (an earlier sync's: %v)", errWritesPending, err)
	}
	wctx, cancel := context.WithTimeout(ctx, syncWriteWait)
	defer cancel()
	var first, last int64
	if err := q.QueryRowContext(ctx, t.c.NoteRange()).Scan(&first, &last); err != nil {
		return false, err
	}
	if last == 0 {
		return false, t.allSynced(ctx, q)
	}
	if last-first >= syncMaxNotes {
		last, more = first+syncMaxNotes-1, true
	}
	if err := t.syncNoted(wctx, q, last); err != nil {
		return false, err
	}
	if _, err := dbconn.ExecWhole(ctx, q, t.c.Log(), t.c.ForgetNotes(), last); err != nil {
		return false, fmt.Errorf("trigger capture: forget the synced notes: %w", err)
	}
	return more, nil
}

// writes are a sync's writes to the target, done once done is closed (err then says how).
type writes struct {
	done chan struct{}
	err  error
}

// syncNoted reads, in q, the keys noted up to last and their current rows, and has the writer
// delete those keys from the target and write the rows, waiting for that while ctx lasts.
// Deleting every noted key first, by its exact bytes, and then writing the rows also handles a key
// that changed only in case or accents. q's results are bytes as stored and times in UTC, like the
// row sessions that write them.
func (t *triggerCapture) syncNoted(ctx context.Context, q dbconn.Execer, last int64) error {
	noted, rows, err := t.readNoted(ctx, q, last)
	if err != nil {
		return err
	}
	w := &writes{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		// The writes outlive ctx (they may not be cut off in the middle of a batch), and later
		// syncs wait for them (pending).
		wctx := context.WithoutCancel(ctx)
		if err := t.writeBatches(wctx, noted, len(t.q.KeyPositions()), t.q.DeleteKeys); err != nil {
			w.err = fmt.Errorf("trigger capture: delete the noted keys: %w", err)
			return
		}
		write := func(n int) string { return t.q.WriteRows(n, table.Replace) }
		if err := t.writeBatches(wctx, rows, t.q.Columns(), write); err != nil {
			w.err = fmt.Errorf("trigger capture: write the noted rows: %w", err)
		}
	}()
	select {
	case <-w.done:
		if w.err != nil {
			return w.err
		}
	case <-ctx.Done():
		t.pendMu.Lock()
		t.pending = w
		t.pendMu.Unlock()
		return fmt.Errorf("%w (%v)", errWritesPending, ctx.Err())
	}
	t.synced.Add(1)
	t.notes.Store(last)
	return nil
}

// waitPending waits for the writes of a sync that stopped waiting for them (any number of callers
// may wait for the same). Whether they failed does not matter: their notes stayed.
func (t *triggerCapture) waitPending(ctx context.Context) error {
	t.pendMu.Lock()
	w := t.pending
	t.pendMu.Unlock()
	if w == nil {
		return nil
	}
	select {
	case <-w.done:
		if w.err != nil {
			t.log.Debug("trigger capture: the writes of an earlier sync failed; its notes stayed", "error", w.err)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	t.pendMu.Lock()
	if t.pending == w {
		t.pending = nil
	}
	t.pendMu.Unlock()
	return nil
}

// syncVerify syncs every note with q holding the source and the log (a verification chunk's lock).
func (t *triggerCapture) syncVerify(ctx context.Context, q dbconn.Execer) error {
	for more := true; more; {
		var err error
		if more, err = t.syncRead(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// readNoted reads, in q, the keys noted up to last and their current rows, as bytes and times in
// UTC; q's session gets its own settings back afterwards (verification checksums in it next).
func (t *triggerCapture) readNoted(ctx context.Context, q dbconn.Execer, last int64) (noted, rows []any, err error) {
	var cs sql.NullString
	var tz string
	if err := q.QueryRowContext(ctx, "SELECT @@SESSION.character_set_results, @@SESSION.time_zone").Scan(&cs, &tz); err != nil {
		return nil, nil, err
	}
	if _, err := q.ExecContext(ctx, "SET SESSION character_set_results = binary, time_zone = '+00:00'"); err != nil {
		return nil, nil, err
	}
	defer func() {
		back := "NULL"
		if cs.Valid {
			back = dbconn.QuoteString(cs.String)
		}
		if _, rerr := q.ExecContext(context.WithoutCancel(ctx), "SET SESSION character_set_results = "+back+", time_zone = "+dbconn.QuoteString(tz)); err == nil {
			err = rerr
		}
	}()
	keys, read := t.c.SyncForSwap()
	if noted, err = scanAll(ctx, q, keys, len(t.q.KeyPositions()), last); err != nil {
		return nil, nil, fmt.Errorf("trigger capture: read the noted keys: %w", err)
	}
	if rows, err = scanAll(ctx, q, read, t.q.Columns(), last); err != nil {
		return nil, nil, fmt.Errorf("trigger capture: read the noted rows: %w", err)
	}
	return noted, rows, nil
}
