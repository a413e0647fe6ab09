package mdl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/go-sql-driver/mysql"
)

// Purpose is why enginemig locks the application's table, and so how Take locks it. There are
// six, each made below with the values of its rules; the function that enforces a purpose's rules
// states them. The zero Purpose is none (Take refuses it).
type Purpose struct {
	rule   rule
	spin   time.Duration // tries without queuing (MariaDB) before the purpose's next step
	within time.Duration // the bound, where the purpose has one
	// Swap only: the lock's connection (killed at the bound on MySQL), and what a lock not
	// granted means to the cut-over.
	session int64
	refused func(tried time.Duration, last error) error
}

type rule int

const (
	_ rule = iota
	swapRule
	syncRule
	verifyRule
	copyRule
	ddlRule
	carryRule
)

// The purposes' spins.
const (
	// swapTries is the least a cut-over attempt tries its lock: a table written without a pause
	// (a procedure's loop) leaves a gap only now and then.
	swapTries = 2 * time.Second
	// syncTries bounds a sync's tries: the sync holds the chunks' order exclusively meanwhile,
	// which verification's and the cut-over's catch-ups wait for within their own budgets.
	syncTries = 100 * time.Millisecond
	// chunkSpin is how long a chunk's lock is tried before mayQueue is asked: the source is the
	// application's table.
	chunkSpin = time.Second
	// ddlSpin is how long a trigger's DDL is tried before it rests.
	ddlSpin = 2 * time.Second
	// carrySpin is how long the carry's lock is tried before mayQueue is asked: the cut-over's
	// own attempt tries as long (--cutover-lock-wait).
	carrySpin = 300 * time.Millisecond
)

// Swap is a cut-over attempt's LOCK TABLES (apply's, the rollback's, Galera's) within the
// attempt's bound (--cutover-lock-wait); session is conn's connection id; refused says what a
// lock not granted means (the cut-over names the sessions holding the table).
func Swap(within time.Duration, session int64, refused func(tried time.Duration, last error) error) Purpose {
	// The tries hold up nobody, so they go on longer than a queued lock may wait.
	return Purpose{rule: swapRule, spin: max(within, swapTries), within: within, session: session, refused: refused}
}

// Sync is a trigger-capture sync's LOCK TABLES between cut-overs.
var Sync = Purpose{rule: syncRule, spin: syncTries}

// VerifyChunk is a verification chunk's LOCK TABLES (its compare's, its recopy's).
var VerifyChunk = Purpose{rule: verifyRule, spin: chunkSpin}

// CopyChunk is a keyless table's copy chunk's LOCK TABLES.
var CopyChunk = Purpose{rule: copyRule, spin: chunkSpin}

// TriggerDDL is a capture trigger's CREATE on the source, for up to within (what is left of
// --lock-timeout).
func TriggerDDL(within time.Duration) Purpose {
	return Purpose{rule: ddlRule, spin: ddlSpin, within: within}
}

// Carry is the trigger carry's LOCK TABLES ... WRITE of the live table, for up to within
// (--lock-timeout).
func Carry(within time.Duration) Purpose {
	return Purpose{rule: carryRule, spin: carrySpin, within: within}
}

// swap: MariaDB tries for p.spin and never queues, even where mayQueue would allow it: an attempt
// queued after 10 s of tries still failed a wiki edit's SELECT ... FOR UPDATE. MySQL queues, and
// the lock is killed (KILL QUERY through the Locker's pool) at p.within, because lock_wait_timeout
// counts whole seconds and an attempt's budget is in milliseconds. A lock not granted is
// p.refused's error (asked on MySQL after the kill: the application must not wait behind the
// queued lock for it), after "tried for" the tries' time (MariaDB) or "within" the bound (MySQL,
// which so wraps any error); the cut-over tries again after its backoff. Never reported here: the
// cut-over reports its failed attempts itself.
func (l *Locker) swap(ctx context.Context, conn *sql.Conn, p Purpose, stmt string) error {
	if l.mode == queue {
		if err := l.queueKilled(ctx, conn, stmt, p.within, p.session, p.refused); err != nil {
			return fmt.Errorf("within %s: %w", p.within, err)
		}
		return nil
	}
	err := l.tries(ctx, conn, stmt, stmt+" NOWAIT", p.spin)
	if me := (*mysql.MySQLError)(nil); errors.Is(err, ErrNotGranted) && errors.As(err, &me) {
		return fmt.Errorf("tried for %s: %w", p.spin, p.refused(p.spin, me)) // the server's last refusal
	}
	return err
}

// sync: MariaDB tries for p.spin and never queues; MySQL queues for conn's lock_wait_timeout (the
// sync's session sets 1 s: while it waits for a transaction that wrote the source, the
// application's new writes queue behind it). A lock not granted (ErrNotGranted, or the server's
// lock wait error) fails the sync, which is tried again at the next tick. Never reported.
func (l *Locker) sync(ctx context.Context, conn *sql.Conn, p Purpose, stmt string) error {
	return l.tries(ctx, conn, stmt, stmt+" NOWAIT", p.spin)
}

// chunk: the caller must have the lock, so no bound but ctx. MariaDB tries in spins of p.spin;
// after a spin without a gap the lock is queued if mayQueue sees no transaction of the
// application, else the spin is reported (Waiting) and another follows. MySQL queues for conn's
// lock_wait_timeout; verification's lock is sent again (up to five times, after 20 ms, 40 ms ...)
// when the server chose it as a deadlock's victim (1213, seen in a rollback under trigger capture,
// whose source is InnoDB and whose writers' triggers write the change log): nothing was locked
// then, and the transaction it met goes on. A keyless copy's is sent once: the copy runs in apply
// only, from a MyISAM source (a rollback copies nothing), where that deadlock was not seen.
func (l *Locker) chunk(ctx context.Context, conn *sql.Conn, p Purpose, stmt string) error {
	switch {
	case l.mode == noWait:
		return l.lockBefore(ctx, conn, stmt, p.spin, time.Time{})
	case p.rule == verifyRule:
		return l.queueRetrying(ctx, conn, stmt)
	}
	err := l.send(ctx, conn, stmt)
	return err
}

// ddl: stmt is not a LOCK TABLES, so where it must not queue it is sent as SET STATEMENT
// lock_wait_timeout = 0 FOR stmt. Tried patiently (spins of p.spin with rests between them, so
// that a table held without a gap is not asked a thousand times a second) until p.within has
// passed; MariaDB never queues it, MySQL queues it in each spin for conn's lock_wait_timeout (the
// triggers' session sets 2 s). Past the bound it fails "tried for" the time spent, wrapping the
// last refusal (ErrNotGranted, or the lock wait error). Waiting is told every fifth spin: a table
// whose application never leaves it gave no gap in ten spins under load.
func (l *Locker) ddl(ctx context.Context, conn *sql.Conn, p Purpose, stmt string) error {
	return patiently(ctx, p.within, l.Waiting, func() error {
		return l.tries(ctx, conn, stmt, "SET STATEMENT lock_wait_timeout = 0 FOR "+stmt, p.spin)
	})
}

// carry: tried patiently for up to p.within. MariaDB tries in spins of p.spin and queues once
// mayQueue sees no transaction of the application (writers flat out on a MyISAM table, each
// holding it for one statement, leave the tries no gap and cannot close a cycle), each spin
// without a gap reported (Waiting); MySQL queues for conn's lock_wait_timeout (the carry's session
// sets 2 s), again after a rest. Past the bound it fails wrapping ErrNotGranted, naming the bound
// and the tables (the stand-in triggers keep firing; the run asks to be run again). The bound is
// checked between statements, never by cancelling one: the driver closes a connection whose
// statement is cancelled, and the caller keeps conn.
func (l *Locker) carry(ctx context.Context, conn *sql.Conn, p Purpose, stmt string) error {
	deadline := time.Now().Add(p.within)
	err := patiently(ctx, p.within, nil, func() error {
		if l.mode == queue {
			err := l.send(ctx, conn, stmt)
			return err
		}
		return l.lockBefore(ctx, conn, stmt, p.spin, deadline)
	})
	if errors.Is(err, ErrNotGranted) || dbconn.IsLockWait(err) {
		return fmt.Errorf("%w (%s): another session kept %s in use", ErrNotGranted, p.within, strings.Join(l.tables, ", "))
	}
	return err
}
