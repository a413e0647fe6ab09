// Package mdl takes enginemig's locks on the application's tables (LOCK TABLES, a trigger's CREATE
// or DROP) without ever queuing one behind a session that may strengthen its own hold on the
// table: the one way a queued lock turns an application statement into a deadlock's victim.
//
// A transaction holds a metadata lock on a table it wrote until it ends (on MariaDB, a MyISAM
// table's too once the transaction has written it; a table it only read, until the end of the
// statement for MyISAM and of the transaction for InnoDB). A LOCK TABLES queued behind such a
// holder makes every new request for the table wait. If the holder then asks for a stronger lock
// on the table (an UPDATE after a SELECT of an InnoDB table), or waits for something that one of
// the sessions queued behind the LOCK TABLES holds (a row lock, a GET_LOCK name, another table),
// the waits close a cycle, and the server breaks it by failing the statement of least weight:
// always the application's DML (error 1213; InnoDB sees no deadlock). An application that has only
// known MyISAM has never seen that error and does not retry it.
//
// So a lock is never left queued where another session can hold the table:
//   - MariaDB: `LOCK TABLES ... NOWAIT` (other statements with a zero lock_wait_timeout), tried
//     again after a moment until it is granted or the caller's time is spent. A request that
//     never waits is never in a cycle, and the application never waits behind it either. On a
//     table some session holds without a pause the tries find no gap: the caller decides (the
//     cut-over tries again later; LockEventually, for verification and copy chunks, queues where
//     MayQueue sees no sign of a transaction).
//   - MySQL has no NOWAIT for LOCK TABLES and no lock wait under a second: the lock queues as
//     before, and such a transaction can still meet it (docs/runbook.md, "Open transactions and
//     the cut-over"). Looking at performance_schema.metadata_locks first and taking the lock back
//     when it was not granted at once was tried: a fifth of the failures remained, and a table
//     held by transactions without pause was never locked.
package mdl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// How the lock is taken (see the package comment).
type mode int

const (
	queue  mode = iota // MySQL
	noWait             // MariaDB: LOCK TABLES ... NOWAIT, retried
)

// Locker takes locks on one schema's tables.
type Locker struct {
	mode   mode
	tables []string
	ours   []string // marks of enginemig's own statements (MayQueue)
	// Waiting, when set, is told how long LockEventually's last spin (and look at the
	// transactions) took, each time one ends without a gap and the lock may not queue: a table
	// that transactions hold without pause keeps the caller waiting for as long as they do, chunk
	// after chunk, and the operator should know why.
	Waiting func(spun time.Duration)
}

// ErrNotGranted: the lock was not granted within the time allowed.
var ErrNotGranted = errors.New("table lock not granted in time")

// New prepares a Locker for LOCK TABLES statements on the application's table (named for
// messages); ours are the qualified names of enginemig's own tables there (the target), which
// every statement of enginemig's writing sessions names (MayQueue). It reads the server's kind.
func New(ctx context.Context, db *sql.DB, table string, ours ...string) (*Locker, error) {
	l := &Locker{tables: []string{table}, ours: ours}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	if dbconn.MariaDB(version) {
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

// ExecWithin is Exec for a caller that can wait for a gap (a capture trigger's CREATE), tried
// patiently: in spins of 2 s, resting between them (0.25 s, longer each spin, up to 2 s) so that
// a table held without a gap is not asked a thousand times a second, until within has passed;
// waiting, when set, is told how long it has waited after every fifth spin. Where the Locker
// queues (MySQL), each spin's wait is conn's lock_wait_timeout.
func (l *Locker) ExecWithin(ctx context.Context, conn *sql.Conn, stmt string, within time.Duration, waiting func(waited time.Duration)) error {
	return patiently(ctx, within, waiting, func() error { return l.Exec(ctx, conn, stmt, patientSpin) })
}

// LockWithin is LockEventually for at most within: tries of spin, then queued where MayQueue
// sees no sign of an application transaction; where the Locker queues (MySQL), queued for conn's
// lock_wait_timeout and again after a rest, as ExecWithin. It fails wrapping ErrNotGranted
// once within has passed. The bound is checked between statements, never by cancelling one: the
// driver closes a connection whose statement is cancelled, and the caller keeps conn.
func (l *Locker) LockWithin(ctx context.Context, conn *sql.Conn, stmt string, spin, within time.Duration) error {
	deadline := time.Now().Add(within)
	err := patiently(ctx, within, nil, func() error {
		if l.mode == queue {
			_, err := conn.ExecContext(ctx, stmt)
			return err
		}
		return l.lockBefore(ctx, conn, stmt, spin, deadline)
	})
	if errors.Is(err, ErrNotGranted) || dbconn.IsLockWait(err) {
		return fmt.Errorf("%w (%s): another session kept %s in use", ErrNotGranted, within, strings.Join(l.tables, ", "))
	}
	return err
}

// lockBefore is LockEventually until deadline (zero: no bound): past it, the tries fail with
// ErrNotGranted (a lock wait error, which patiently tries again while time remains); a queued
// lock waits conn's lock_wait_timeout.
func (l *Locker) lockBefore(ctx context.Context, conn *sql.Conn, stmt string, spin time.Duration, deadline time.Time) error {
	bounded := !deadline.IsZero()
	for {
		start, try := time.Now(), spin
		if bounded {
			try = max(min(spin, time.Until(deadline)), time.Nanosecond) // 0 would be no bound
		}
		err := l.Lock(ctx, conn, stmt, try)
		if !errors.Is(err, ErrNotGranted) || bounded && !time.Now().Before(deadline) {
			return err
		}
		if l.MayQueue(ctx, conn) {
			_, err := conn.ExecContext(ctx, stmt)
			return err
		}
		if l.Waiting != nil {
			l.Waiting(time.Since(start))
		}
	}
}

// patientSpin is how long ExecWithin tries before it rests.
const patientSpin = 2 * time.Second

// patiently runs try until it succeeds, fails other than by a lock wait, or within has passed,
// resting after each failure (0.25 s, longer each time, up to 2 s).
func patiently(ctx context.Context, within time.Duration, waiting func(time.Duration), try func() error) error {
	began := time.Now()
	for n := 1; ; n++ {
		err := try()
		if err == nil {
			return nil
		}
		waited := time.Since(began)
		if !dbconn.IsLockWait(err) || waited >= within {
			return fmt.Errorf("tried for %s: %w", waited.Round(time.Second), err)
		}
		if n%5 == 0 && waiting != nil {
			waiting(waited)
		}
		select {
		case <-time.After(min(time.Duration(n)*250*time.Millisecond, 2*time.Second)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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

// LockEventually takes stmt's locks for a caller that must have them (verification): tried
// without queuing as Lock does, and queued only once spin has passed with no gap and MayQueue
// says so.
func (l *Locker) LockEventually(ctx context.Context, conn *sql.Conn, stmt string, spin time.Duration) error {
	if l.mode == queue {
		_, err := conn.ExecContext(ctx, stmt)
		return err
	}
	return l.lockBefore(ctx, conn, stmt, spin, time.Time{})
}

// MayQueue looks for a sign that queuing a lock now could close a cycle: a transaction of the
// application open in InnoDB (listed in INNODB_TRX, between its statements or running one that
// does not name enginemig's own tables), looked at twice over 150 ms. Without
// one, the sessions that kept the tries out hold the table for a statement each (writers flat out
// on a MyISAM table, each waiting for the table lock with its metadata lock held), or through a
// HANDLER, which the server closes for a queued lock but not for a try: queuing is then what gets
// the lock. A transaction that writes only MyISAM tables leaves no sign, and can still meet a
// queued lock on such a table. An unreadable list counts as a sign.
func (l *Locker) MayQueue(ctx context.Context, conn *sql.Conn) bool {
	q := `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id <> CONNECTION_ID() AND (trx_query IS NULL`
	args := []any{}
	if len(l.ours) > 0 {
		q += " OR (" + strings.TrimSuffix(strings.Repeat("INSTR(trx_query, ?) = 0 AND ", len(l.ours)), " AND ") + ")"
		for _, o := range l.ours {
			args = append(args, o)
		}
	} else {
		q += " OR TRUE"
	}
	q += ")"
	// The server fills INNODB_TRX's rows again only when nobody read them in the last 100 ms: a
	// first look may show the list as it was long ago; the second, 150 ms later, shows it as it
	// is (unless another session reads the list more often than that).
	for i := 0; i < 2; i++ {
		if i > 0 {
			time.Sleep(150 * time.Millisecond)
		}
		var n int
		if err := conn.QueryRowContext(ctx, q, args...).Scan(&n); err != nil || n > 0 {
			return false
		}
	}
	return true
}

// ReportAfter is how long a wait for a gap goes unreported, and then how often it is reported.
const ReportAfter = 15 * time.Second

// ReportEvery returns a Waiting that logs, each time another every of waiting has added up over
// the Locker's locks (a verification's chunks, one after another), that what (a verification, a
// copy) still waits for a moment without a transaction on the Locker's tables, and how long in all.
// Safe for concurrent use.
func (l *Locker) ReportEvery(log *slog.Logger, what string, every time.Duration) func(time.Duration) {
	var mu sync.Mutex // parallel chunks share the Locker
	var total, reported time.Duration
	return func(spun time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		total += spun
		if total-reported < every {
			return
		}
		reported = total
		log.Info(what+": waiting for a moment when no open transaction holds "+strings.Join(l.tables, ", ")+
			" or a table locked with it; a lock queued behind them could make their statements fail",
			"waited", total.Round(100*time.Millisecond))
	}
}
