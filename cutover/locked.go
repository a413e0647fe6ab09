package cutover

// What a swap does while its session holds the table: take the lock within a deadline, catch up
// and record under it, and wait for the rename to queue behind it. Both swaps (the sentry method
// and Galera's) use these.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/go-sql-driver/mysql"
)

// lockSessionSlack is the lock session's idle allowance beyond its longest planned idle wait.
const lockSessionSlack = 5 * time.Second

// prepareLockSession gives the lock's session a lock wait of 1 s (on MySQL mdl.Swap kills it
// sooner) and an idle limit. The limit makes the server end the session by itself should
// enginemig lose the server without the server seeing the connection close (a network that
// drops everything, a paused machine): its locks would otherwise hold the table, and on a Galera
// node every commit queued behind a rename in total order, for wait_timeout (8 hours by default).
// Between its statements the session waits at most for the Recorder's write and the rename's
// queue (LockWait). The sentry swap is safe should the limit end the session early (the rename
// fails on the sentry); the Galera swap checks its session is alive before it sends the rename.
func prepareLockSession(ctx context.Context, conn *sql.Conn, cfg Config) error {
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = 1, wait_timeout = %d", int(lockSessionLimit(cfg).Seconds()))); err != nil {
		return fmt.Errorf("set the lock session's waits: %w", err)
	}
	return nil
}

// lockSessionLimit is the lock session's idle limit, in whole seconds (wait_timeout's unit).
func lockSessionLimit(cfg Config) time.Duration {
	return time.Duration(math.Ceil((cfg.LockWait + cfg.CatchUp + lockSessionSlack).Seconds())) * time.Second
}

// whileLocked is what both swaps do once their lock is granted: tell a test's hook
// (Faults.OnLocked), arrange the unlock (once; a failed UNLOCK is followed by closing the
// connection, which releases the locks), bring the target up to date under the lock, and record
// the position the swap stands for.
func whileLocked(ctx context.Context, connA *sql.Conn, sw Swap, target Target, cfg Config, rec Recorder) (unlock func(), pos string, err error) {
	if f := faultsOf(ctx).OnLocked(); f != nil {
		f()
	}
	unlocked := false
	unlock = func() {
		if !unlocked {
			if _, err := connA.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); err != nil {
				cfg.Logger.Warn("cut-over: unlock failed; closing the connection releases the locks", "error", err)
			}
			unlocked = true
		}
	}
	catchCtx, cancel := context.WithTimeout(ctx, cfg.CatchUp)
	pos, err = target.WaitFor(catchCtx, connA)
	cancel()
	if err != nil {
		return unlock, pos, fmt.Errorf("%s did not catch up within %s while the table was locked: %w", sw.To, cfg.CatchUp, err)
	}
	if rec != nil {
		if err := rec.RecordSwap(ctx, pos); err != nil {
			if errors.Is(err, ErrAbort) {
				return unlock, pos, &fatalError{err}
			}
			return unlock, pos, fmt.Errorf("before the rename: %w", err)
		}
	}
	return unlock, pos, nil
}

// lockTables takes a swap's locks (stmt) on conn (connection connID) within d, by the cut-over's
// rules (mdl.Swap: on MariaDB tried without queuing, never queued; on MySQL queued and killed at
// d). A lock not granted names the sessions holding t (notGranted), and the attempt is tried again
// after the backoff.
func lockTables(ctx context.Context, db *sql.DB, conn *sql.Conn, connID int64, stmt string, d time.Duration, t lockwait.Table) error {
	l, err := mdl.New(ctx, db, t.Name)
	if err != nil {
		return err
	}
	refused := func(tried time.Duration, last error) error {
		waiter := lockwait.Session{ID: connID, State: "Waiting for table metadata lock", Time: tried}
		h := lockwait.FindHolders(ctx, db, waiter, []lockwait.Table{t}, func(id int64) bool { return id == connID })
		return &notGranted{holders: h, err: last}
	}
	return l.Take(ctx, conn, mdl.Swap(d, connID, refused), stmt)
}

func killQuery(db *sql.DB, id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db.ExecContext(ctx, table.KillQuery(id))
}

// waitUntilBlocked polls until connection id (the rename) waits for a lock and has taken the
// table being swapped in, so that the lock it waits for is the table's (see queueProbe).
func waitUntilBlocked(ctx context.Context, db *sql.DB, id int64, probe *queueProbe, done <-chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case err := <-done:
			if err == nil {
				return errors.New("rename finished while the tables were locked: lock was not effective")
			}
			return fmt.Errorf("rename failed before queueing: %w", err)
		default:
		}
		var state string
		found, err := lockwait.Sessions(ctx, db, []int64{id})
		if err == nil {
			state = found[0].State
		}
		if err == nil && strings.Contains(strings.ToLower(state), "lock") {
			var taken bool
			if taken, err = probe.taken(ctx); taken {
				return nil
			}
			if err == nil {
				state += ", on " + probe.sw.To
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("rename did not queue on the lock within %s: process list: %w", limit, err)
			}
			return fmt.Errorf("rename did not queue on the lock within %s (state %q)", limit, state)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lostRenameWait bounds how long a rename whose answer was lost is given to end on the server
// before the tables are read to learn whether it went through.
const lostRenameWait = gateQueueWait

// renamedAnyway reports whether a rename that returned err went through, by whether name (a
// table only the rename creates) exists. One the server refused changed nothing (a RENAME is
// atomic); one whose answer was lost with its connection may have gone through all the same,
// which the tables tell once its session (idB) has ended its statement.
func renamedAnyway(ctx context.Context, db *sql.DB, schema, name string, idB int64, err error) bool {
	if _, refused := errors.AsType[*mysql.MySQLError](err); refused {
		return false
	}
	ctx = context.WithoutCancel(ctx)
	for end := time.Now().Add(lostRenameWait); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var n int
		if db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND COMMAND <> 'Sleep'", idB).Scan(&n) == nil && n == 0 {
			break
		}
	}
	var n int
	return db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&n) == nil && n == 1
}
