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

// How the purposes' rules are carried out (purpose.go says which purpose uses what).

// tries sends stmt, or, where it must not queue, noWait (stmt that fails at once rather than wait)
// until it goes through or within has passed (0: until ctx ends); then the error wraps
// ErrNotGranted and the server's lock wait error (dbconn.IsLockWait).
func (l *Locker) tries(ctx context.Context, conn *sql.Conn, stmt, noWait string, within time.Duration) error {
	if l.mode == queue {
		err := l.send(ctx, conn, stmt)
		return err
	}
	var deadline time.Time
	if within > 0 {
		deadline = time.Now().Add(within)
	}
	for {
		err := l.send(ctx, conn, noWait)
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

// lockBefore tries stmt (a LOCK TABLES) in spins of spin until deadline (zero: no bound), queuing
// it after a spin without a gap where mayQueue says so, and telling Waiting of each other spin.
// Past the deadline the tries fail with ErrNotGranted (a lock wait error, which patiently tries
// again while time remains); a queued lock waits conn's lock_wait_timeout.
func (l *Locker) lockBefore(ctx context.Context, conn *sql.Conn, stmt string, spin time.Duration, deadline time.Time) error {
	bounded := !deadline.IsZero()
	for {
		start, try := time.Now(), spin
		if bounded {
			try = max(min(spin, time.Until(deadline)), time.Nanosecond) // 0 would be no bound
		}
		err := l.tries(ctx, conn, stmt, stmt+" NOWAIT", try)
		if !errors.Is(err, ErrNotGranted) || bounded && !time.Now().Before(deadline) {
			return err
		}
		if l.mayQueue(ctx, conn) {
			err := l.send(ctx, conn, stmt)
			return err
		}
		if l.Waiting != nil {
			l.Waiting(time.Since(start))
		}
	}
}

// patiently runs try until it succeeds, fails other than by a lock wait, or within has passed,
// resting after each failure (0.25 s, longer each time, up to 2 s); waiting, when set, is told
// how long it has waited after every fifth failure.
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

// queueKilled sends stmt, queued, and kills it (KILL QUERY on the Locker's pool) if it has not got
// its lock within d; one killed so fails with refused's error, asked after the kill.
func (l *Locker) queueKilled(ctx context.Context, conn *sql.Conn, stmt string, d time.Duration, session int64, refused func(time.Duration, error) error) error {
	timer := time.AfterFunc(d, func() { l.kill(session) })
	err := l.send(ctx, conn, stmt)
	if !timer.Stop() && err != nil {
		return refused(d, err)
	}
	return err
}

func (l *Locker) kill(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.db.ExecContext(ctx, dbconn.KillQuery(id))
}

// queueRetrying sends stmt, queued, again (up to five times in all, after 20 ms, 40 ms ...) when
// the server chose it as a deadlock's victim.
func (l *Locker) queueRetrying(ctx context.Context, conn *sql.Conn, stmt string) error {
	for try := 1; ; try++ {
		err := l.send(ctx, conn, stmt)
		if err == nil || try == 5 || !dbconn.IsDeadlock(err) {
			return err
		}
		select {
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// mayQueue looks for a sign that queuing a lock now could close a cycle: a transaction of the
// application open in InnoDB (listed in INNODB_TRX, between its statements or running one that
// does not name enginemig's own tables), looked at twice over 150 ms. Without
// one, the sessions that kept the tries out hold the table for a statement each (writers flat out
// on a MyISAM table, each waiting for the table lock with its metadata lock held), or through a
// HANDLER, which the server closes for a queued lock but not for a try: queuing is then what gets
// the lock. A transaction that writes only MyISAM tables leaves no sign, and can still meet a
// queued lock on such a table. An unreadable list counts as a sign.
func (l *Locker) mayQueue(ctx context.Context, conn *sql.Conn) bool {
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
