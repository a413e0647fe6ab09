package mdl

import (
	"context"
	"database/sql"
	"time"
)

// What the tests reach inside the package.

// Tries is the tries of a lock that does not queue (MariaDB), for within.
func (l *Locker) Tries(ctx context.Context, conn *sql.Conn, stmt string, within time.Duration) error {
	return l.tries(ctx, conn, stmt, stmt+" NOWAIT", within)
}

// MayQueue is mayQueue.
func (l *Locker) MayQueue(ctx context.Context, conn *sql.Conn) bool { return l.mayQueue(ctx, conn) }

// Spinning is p with spins of spin: a test of a wait shorter than the purpose's own.
func (p Purpose) Spinning(spin time.Duration) Purpose {
	p.spin = spin
	return p
}
