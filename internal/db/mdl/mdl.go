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
//     table some session holds without a pause the tries find no gap: the lock's Purpose decides
//     what then (the cut-over fails its attempt and tries again later; a verification or copy
//     chunk queues where mayQueue sees no sign of a transaction).
//   - MySQL has no NOWAIT for LOCK TABLES and no lock wait under a second: the lock queues as
//     before, for as long as its Purpose allows, and such a transaction can still meet it
//     (docs/runbook/special-cases.md, "Open transactions and the cut-over"). Looking at
//     performance_schema.metadata_locks first and taking the lock back when it was not granted at
//     once was tried: a fifth of the failures remained, and a table held by transactions without
//     pause was never locked.
//
// So there is one verb, Locker.Take, and the caller names only why it locks (a Purpose): each
// purpose's rules (how long it tries, whether and when it queues, its bound, what a failure means,
// how its waits are reported) are stated once, in purpose.go, where they are enforced. A caller
// that sent such a statement itself, or chose a spin, would take the table by rules of its own.
package mdl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
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

// Locker takes locks on one schema's tables, each by the rules of its Purpose (purpose.go).
type Locker struct {
	mode   mode
	db     *sql.DB // the pool New read the server from: a Swap's kill goes through it
	tables []string
	ours   []string // marks of enginemig's own statements (mayQueue)
	server string   // the server's key (sent.go)
	// Waiting, when set, is told how long a wait for a gap took, where the Purpose reports its
	// waits (purpose.go says which do, and when): a table that transactions hold without pause
	// keeps the caller waiting for as long as they do, chunk after chunk, and the operator should
	// know why.
	Waiting func(spun time.Duration)
}

// ErrNotGranted: the lock was not granted within the time allowed.
var ErrNotGranted = errors.New("table lock not granted in time")

// New prepares a Locker for statements that lock the application's table (named for
// messages); ours are the qualified names of enginemig's own tables there (the target), which
// every statement of enginemig's writing sessions names (mayQueue). It reads the server's kind.
func New(ctx context.Context, db *sql.DB, table string, ours ...string) (*Locker, error) {
	l := &Locker{db: db, tables: []string{table}, ours: ours}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), "+serverKeySQL).Scan(&version, &l.server); err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	if dbconn.MariaDB(version) {
		l.mode = noWait
	}
	return l, nil
}

// Take runs stmt on conn, a LOCK TABLES on the Locker's tables (a TriggerDDL's CREATE or DROP
// TRIGGER), by p's rules: how long it is tried without queuing, whether and when it may queue,
// its bound, what a failure means and how a wait is reported are p's (purpose.go), never the
// caller's. An error that is not about the lock (a missing table, a lost connection) returns at
// once.
func (l *Locker) Take(ctx context.Context, conn *sql.Conn, p Purpose, stmt string) error {
	switch p.rule {
	case swapRule:
		return l.swap(ctx, conn, p, stmt)
	case syncRule:
		return l.sync(ctx, conn, p, stmt)
	case verifyRule, copyRule:
		return l.chunk(ctx, conn, p, stmt)
	case ddlRule:
		return l.ddl(ctx, conn, p, stmt)
	case carryRule:
		return l.carry(ctx, conn, p, stmt)
	}
	return fmt.Errorf("lock with no purpose: %s", stmt)
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
