// Package mdl takes enginemig's locks on the application's tables (LOCK TABLES, a trigger's CREATE
// or DROP) without ever queuing one behind a session that may strengthen its own hold on the
// table: the one way a queued lock turns an application statement into a deadlock's victim.
//
// A transaction that read a table holds a shared metadata lock on it until it ends. A LOCK TABLES
// queued behind it makes every new request for the table wait, that transaction's own UPDATE
// included; the UPDATE waits for the queued lock, which waits for the transaction: a cycle, and
// the server breaks it by failing the statement of least weight, always the application's DML
// (error 1213; InnoDB sees no deadlock). An application that has only known MyISAM has never seen
// that error and does not retry it.
//
// So a lock is never left queued while another session may hold the table's metadata lock for
// longer than a statement:
//   - MariaDB: `LOCK TABLES ... NOWAIT` (other statements with a zero lock_wait_timeout), tried
//     again after a moment until it is granted. A request that never waits is never in a cycle,
//     and the application never waits behind it either.
//   - MySQL has no NOWAIT for LOCK TABLES and no lock wait under a second: the lock queues as
//     before, and such a transaction can still meet it (docs/runbook.md, "Open transactions and
//     the cut-over"). Looking at performance_schema.metadata_locks first and taking the lock back
//     when it was not granted at once was tried: a fifth of the failures remained, and a table
//     held by transactions without pause was never locked.
//   - Where no session can hold the tables beyond a statement (MariaDB releases a MyISAM table's
//     metadata lock at the end of each statement, even inside a transaction), a queued lock cannot
//     be in a cycle, and queuing is what gets it granted on a busy table: the lock is then sent as
//     it is (the caller's lock wait applies).
package mdl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// How the lock is taken (see the package comment).
type mode int

const (
	queue  mode = iota // no session holds the tables beyond a statement, or MySQL
	noWait             // MariaDB: LOCK TABLES ... NOWAIT, retried
)

// Locker takes locks on one schema's tables. Built once per table set: it reads the server's
// kind and the tables' engines.
type Locker struct {
	mode   mode
	tables []string
}

// ErrNotGranted: the lock was not granted within the time allowed.
var ErrNotGranted = errors.New("table lock not granted in time")

// New prepares a Locker for LOCK TABLES statements on schema's tables (their names, unquoted).
func New(ctx context.Context, db *sql.DB, schema string, tables ...string) (*Locker, error) {
	l := &Locker{tables: tables}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	if !dbconn.MariaDB(version) {
		return l, nil
	}
	q := "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?" +
		strings.Repeat(", ?", len(tables)-1) + ") AND ENGINE NOT IN ('MyISAM', 'Aria', 'MRG_MyISAM', 'MEMORY', 'CSV', 'ARCHIVE')"
	args := []any{schema}
	for _, t := range tables {
		args = append(args, t)
	}
	var transactional int
	if err := db.QueryRowContext(ctx, q, args...).Scan(&transactional); err != nil {
		return nil, fmt.Errorf("engines of the tables to lock: %w", err)
	}
	if transactional > 0 {
		l.mode = noWait
	}
	return l, nil
}

// Queues reports a Locker that sends its lock as it is (see the package comment): the caller's
// lock wait, and any deadline it keeps, apply to it.
func (l *Locker) Queues() bool { return l.mode == queue }

// Lock runs stmt (a LOCK TABLES on the Locker's tables) on conn, trying until it is granted or
// within passes (0: until ctx ends); then the error wraps ErrNotGranted and the server's lock
// wait error (dbconn.IsLockWait). An error that is not about the lock (a missing table, a lost
// connection) returns at once.
func (l *Locker) Lock(ctx context.Context, conn *sql.Conn, stmt string, within time.Duration) error {
	return l.run(ctx, conn, stmt, stmt+" NOWAIT", within)
}

// Exec is Lock for any other statement that takes the tables' metadata locks (CREATE or DROP
// TRIGGER): the same rule, the same errors.
func (l *Locker) Exec(ctx context.Context, conn *sql.Conn, stmt string, within time.Duration) error {
	return l.run(ctx, conn, stmt, "SET STATEMENT lock_wait_timeout = 0 FOR "+stmt, within)
}

// run sends stmt, or, where it must not queue, noWait (stmt that fails at once rather than wait)
// until it goes through.
func (l *Locker) run(ctx context.Context, conn *sql.Conn, stmt, noWait string, within time.Duration) error {
	if l.mode == queue {
		_, err := conn.ExecContext(ctx, stmt)
		return err
	}
	var deadline time.Time
	if within > 0 {
		deadline = time.Now().Add(within)
	}
	for {
		_, err := conn.ExecContext(ctx, noWait)
		if err == nil || !dbconn.IsLockWait(err) {
			return err
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return fmt.Errorf("%w (%s): another session kept %s in use: %w", ErrNotGranted, within, strings.Join(l.tables, ", "), err)
		}
		// A moment, spread so that two of enginemig's own lockers do not meet in step.
		select {
		case <-time.After(time.Duration(500+rand.IntN(1500)) * time.Microsecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
