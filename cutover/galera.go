package cutover

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/lockwait"
)

// ErrRenamedLate marks a Galera swap whose rename got the table only after the cut-over's lock
// was let go: writes made to the original in between are in the kept original only.
var ErrRenamedLate = errors.New("the rename got the table after the cut-over's lock was released")

// attemptGalera is one attempt of the swap on a Galera node. Galera runs DDL in total-order
// isolation (TOI): once a DDL is ordered, every later DDL and every later commit of the node
// waits for it, and it cannot be killed. So no session of enginemig may wait for anything while
// a DDL waits for one of its locks. The sentry method breaks that (its DROP of the sentry is DDL
// issued behind the lock its own rename waits for), so here there is no sentry:
//
//  1. A locks From (LOCK TABLES, a MyISAM table: local, no TOI), within LockWait;
//  2. the target catches up and the Recorder notes the position (InnoDB writes, no DDL);
//  3. nothing in total order may be pending on the node (it could be waiting for A's lock);
//  4. B sends RENAME From TO Aside, To TO From (one atomic DDL in TOI); A waits until B is
//     queued on From (it holds To), within LockWait;
//  5. A unlocks, which is all A does after step 4: the rename goes first, then the
//     application's queued statements run on the new table.
//
// Every wait is bounded and ends with A's lock released; a rename that cannot queue in time is
// let through late, and reported (ErrRenamedLate), because a DDL in total order cannot be withdrawn.
func attemptGalera(ctx context.Context, db *sql.DB, sw Swap, target Target, cfg Config, rec Recorder) (time.Duration, string, error) {
	connA, err := db.Conn(ctx)
	if err != nil {
		return 0, "", err
	}
	defer connA.Close()
	defer connA.Raw(func(any) error { return driver.ErrBadConn }) // its session settings stay with it
	var idA int64
	if err := connA.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&idA); err != nil {
		return 0, "", err
	}
	probe, err := newQueueProbe(ctx, db, sw)
	if err != nil {
		return 0, "", err
	}
	defer probe.close()
	if err := idle(ctx, db, sw, "before locking"); err != nil {
		return 0, "", err
	}
	if err := noTableLockQueue(ctx, db, sw); err != nil {
		return 0, "", err
	}
	if err := prepareLockSession(ctx, connA, cfg); err != nil {
		return 0, "", err
	}
	lock := "LOCK TABLES " + dbconn.QualifiedName(sw.Schema, sw.From) + " WRITE"
	for _, l := range sw.LockWith {
		lock += ", " + l
	}
	if err := lockTables(ctx, db, connA, idA, lock, cfg.LockWait, lockwait.Table{Schema: sw.Schema, Name: sw.From}); err != nil {
		return 0, "", fmt.Errorf("lock %s: %w", sw.From, err)
	}
	locked := time.Now()
	unlock, pos, err := whileLocked(ctx, connA, sw, target, cfg, rec)
	defer unlock()
	if err != nil {
		return 0, pos, err
	}
	if err := idle(ctx, db, sw, "under the lock"); err != nil {
		return 0, pos, err
	}
	// With A's session gone (its idle limit, prepareLockSession) the rename would go through
	// without the lock, and writes made since would be in the original only.
	if _, err := connA.ExecContext(ctx, "DO 0"); err != nil {
		return 0, pos, fmt.Errorf("the lock's session before the rename: %w", err)
	}
	if err := renameQueued(ctx, db, idA, probe, sw, cfg, unlock); err != nil {
		return 0, pos, err
	}
	return time.Since(locked), pos, nil
}

// renameQueued sends the rename, lets A's lock go once the rename is queued on From (or once
// LockWait has passed), and waits for the rename.
func renameQueued(ctx context.Context, db *sql.DB, idA int64, probe *queueProbe, sw Swap, cfg Config, unlock func()) error {
	connB, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer connB.Close()
	var idB int64
	if err := connB.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&idB); err != nil {
		return err
	}
	// Two channels: waitUntilBlocked consumes the one it watches.
	renameDone, watched := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := connB.ExecContext(context.WithoutCancel(ctx), table.RenameTables(sw.Schema, [2]string{sw.From, sw.Aside}, [2]string{sw.To, sw.From}))
		watched <- err
		renameDone <- err
	}()
	queued := waitUntilBlocked(ctx, db, idB, probe, watched, cfg.LockWait)
	if f := faultsOf(ctx).OnRenameQueued(); queued == nil && f != nil {
		f(idA)
	}
	unlock()
	err = <-renameDone
	if err != nil && renamedAnyway(ctx, db, sw.Schema, sw.Aside, idB, err) {
		if queued == nil { // it went first once the lock was let go: nothing is missing
			cfg.Logger.Warn("cut-over: the rename's answer was lost; the tables show it went through", "error", err)
			return nil
		}
		err = nil // reported below as late
	}
	switch {
	case err != nil:
		// RENAME is atomic: nothing was renamed, the original is in place.
		return fmt.Errorf("rename: %w", err)
	case queued != nil:
		return &SwappedError{Err: fmt.Errorf("%w (%v): writes to %s in between are in %s only; compare the two tables", ErrRenamedLate, queued, sw.From, sw.Aside)}
	}
	return nil
}

// queuedFor is how long an application statement must have waited for the table's own lock
// before the Galera swap takes it as held by someone (normal MyISAM traffic waits milliseconds).
const queuedFor = 50 * time.Millisecond

// noTableLockQueue fails the attempt while application statements wait for From's table-level
// lock behind another session (its LOCK TABLES ... READ, a backup's, a long statement). On a
// Galera node a LOCK TABLES ... WRITE sent then made the server abort one of those waiting
// statements with error 1689 ("Wait on a lock was aborted due to a pending exclusive lock"), once
// per attempt (TestGalera's blocked cut-over under load, docs/testing/replicas-hosted-galera.md; off Galera the same wait
// never failed). The attempt is retried after the backoff, as if its lock had not
// been granted, which it would not have been.
func noTableLockQueue(ctx context.Context, db *sql.DB, sw Swap) error {
	n, err := tableLockWaiters(ctx, db, sw.Schema, sw.From, queuedFor)
	if err != nil || n == 0 {
		return nil // the process list is advisory here
	}
	return fmt.Errorf("%d statement(s) on %s wait for its table lock, held by another session (a LOCK TABLES, a backup, a long statement): on a Galera node a cut-over lock sent now makes the server abort one of them (error 1689)", n, sw.From)
}

// idle fails the attempt while the node is busy in total order: a DDL running or waiting on the
// node, or replicated events waiting to be applied (one may be a DDL). The rename would be
// ordered behind it, and if that DDL waits for the cut-over's lock, the rename could not queue
// on the table before the lock is let go.
func idle(ctx context.Context, db *sql.DB, sw Swap, when string) error {
	var queue int64
	var name string
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_local_recv_queue'").Scan(&name, &queue); err != nil {
		return fmt.Errorf("read wsrep_local_recv_queue: %w", err)
	}
	if queue > 0 {
		return fmt.Errorf("%s: %d replicated event(s) wait to be applied on this node (wsrep_local_recv_queue)", when, queue)
	}
	return noDDL(ctx, db, when)
}

// noDDL fails the attempt while a DDL runs or waits in total order on the node.
func noDDL(ctx context.Context, db *sql.DB, when string) error {
	rows, err := db.QueryContext(ctx, `SELECT ID, COALESCE(STATE, ''), COALESCE(INFO, '') FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Sleep' AND (STATE LIKE '%isolation%' OR INFO REGEXP '^[[:space:]]*(ALTER|CREATE|DROP|RENAME|TRUNCATE|OPTIMIZE|REPAIR|ANALYZE|GRANT|REVOKE)[[:space:]]')`)
	if err != nil {
		return fmt.Errorf("read the process list: %w", err)
	}
	defer rows.Close()
	var busy []string
	for rows.Next() {
		var id int64
		var state, info string
		if err := rows.Scan(&id, &state, &info); err != nil {
			return err
		}
		busy = append(busy, fmt.Sprintf("connection %d (%s: %.60s)", id, state, info))
	}
	if len(busy) > 0 {
		return fmt.Errorf("%s: DDL in total-order isolation on this node: %s", when, strings.Join(busy, "; "))
	}
	return rows.Err()
}
