package cutover

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// queueProbe tells whether the queued RENAME has taken the table being swapped in (Swap.To).
//
// RENAME takes its metadata locks one at a time in name order, and Swap.To (`_t_new`, `_t_old`)
// sorts before the table (`t`). While another session holds Swap.To, even for a moment (InnoDB's
// purge takes a shared metadata lock on a table it purges rows of, and the shadow takes many
// writes), the rename waits there, its process-list state already "Waiting for table metadata
// lock". Unlocking the table then lets the application's queued writes into the original before
// the rename asks for it: TestSwapWaitsUntilTheRenameQueuesOnTheTable lost 5192 writes that way
// when the state alone was trusted, and the concurrent-writer tests lost a few under load. Once
// the rename holds Swap.To, the only locks it still waits for are the table's and the sentry's,
// both held by the cut-over's session, and the table's comes first.
type queueProbe struct {
	conn  *sql.Conn
	viaPS bool   // the server has no zero lock wait (MySQL): read performance_schema instead
	table string // Swap.To, qualified
	sw    Swap
}

func newQueueProbe(ctx context.Context, db *sql.DB, sw Swap) (*queueProbe, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	p := &queueProbe{conn: conn, table: dbconn.QualifiedName(sw.Schema, sw.To), sw: sw}
	// MySQL's minimum lock wait is 1 s, which the probe would add to the stall; a session whose
	// lock wait cannot be read as 0 reads performance_schema instead.
	var wait int64 = -1
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 0"); err == nil {
		conn.QueryRowContext(ctx, "SELECT @@SESSION.lock_wait_timeout").Scan(&wait)
	}
	p.viaPS = wait != 0
	return p, nil
}

// taken reports whether another session (the rename) holds Swap.To exclusively. MariaDB: SHOW
// CREATE TABLE asks for a high-priority shared lock, which a pending exclusive request does not
// hold up but a granted one does, and with no lock wait allowed it fails at once. MySQL: the
// exclusive lock is GRANTED in performance_schema.metadata_locks.
func (p *queueProbe) taken(ctx context.Context) (bool, error) {
	if p.viaPS {
		var n int
		err := p.conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM performance_schema.metadata_locks WHERE OBJECT_TYPE = 'TABLE'
			AND OBJECT_SCHEMA = ? AND OBJECT_NAME = ? AND LOCK_TYPE = 'EXCLUSIVE' AND LOCK_STATUS = 'GRANTED'`, p.sw.Schema, p.sw.To).Scan(&n)
		if err != nil {
			return false, fmt.Errorf("performance_schema.metadata_locks (needed on this server to see the rename queue): %w", err)
		}
		return n > 0, nil
	}
	rows, err := p.conn.QueryContext(ctx, "SHOW CREATE TABLE "+p.table)
	if err == nil {
		rows.Close()
		return false, nil
	}
	if dbconn.IsLockWait(err) {
		return true, nil
	}
	return false, err
}

// close returns nothing to the pool: the session has a zero lock wait.
func (p *queueProbe) close() {
	p.conn.Raw(func(any) error { return driver.ErrBadConn })
	p.conn.Close()
}
