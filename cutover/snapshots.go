package cutover

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/enginemig/enginemig/pace/lockwait"
)

// Snapshots older than the table swapped in. InnoDB refuses a read of a table it created after the
// reader's snapshot (error 1412, "Table definition has changed"), by any index, and a snapshot
// younger than the table but older than its rows sees them missing; a RENAME changes neither. A
// transaction of the application that took its snapshot before the swap (autocommit off, a read of
// any InnoDB table) and reads the table only after it would get one or the other
// (docs/how-it-works/cutover.md, "Snapshots older than the InnoDB table"). So before its first
// attempt the swap of an InnoDB table waits until every transaction open when the wait began has
// ended, or has been open for Config.SnapshotWait: a web request's transaction ends within a
// moment, while one open longer (a session idle in a transaction, a dump) would hold every table's
// swap to no end; those are named in a warning instead. Once none is left, no older snapshot can
// come back: a later transaction takes a later one.
//
// The transactions are read from information_schema.INNODB_TRX, which lists every transaction
// InnoDB has started, read-only ones too (SHOW ENGINE INNODB STATUS prints read views, but MySQL
// leaves read-only transactions out of it). A snapshot is never older than its transaction. A
// transaction is known by its session and the second it began: a session's next transaction
// begun within the same second passes for the same one, which only lengthens the wait (its id
// would not do: a read-only transaction's changes when it first writes). Only REPEATABLE READ
// transactions keep a snapshot between statements, a single autocommit statement's ends with it,
// and the server's own (session 0) read no application table. The server refills that list only
// after 100 ms in which nobody read it, so each look runs in a transaction of its own, which the
// list must show for the look to count: a list left stale by frequent readers is never taken for
// a fresh one.
const (
	snapshotPoll   = 200 * time.Millisecond
	snapshotLookup = `SELECT trx_mysql_thread_id, UNIX_TIMESTAMP(trx_started), UNIX_TIMESTAMP(), trx_mysql_thread_id = CONNECTION_ID()
		FROM information_schema.INNODB_TRX
		WHERE trx_mysql_thread_id = CONNECTION_ID()
		OR (trx_mysql_thread_id > 0 AND trx_isolation_level = 'REPEATABLE READ' AND trx_autocommit_non_locking = 0)`
)

// openTrx is a transaction of another session.
type openTrx struct {
	thread, began int64         // its session, and the second it began (Unix time)
	age           time.Duration // whole seconds
}

func (t openTrx) key() [2]int64 { return [2]int64{t.thread, t.began} }

// waitForOlderSnapshots is the wait described above. The transaction list is advisory: when it
// cannot be read (no PROCESS privilege) the swap goes ahead, and the log says what that risks.
func waitForOlderSnapshots(ctx context.Context, db *sql.DB, sw Swap, cfg Config, lim limit) error {
	if cfg.SnapshotWait <= 0 || !isInnoDB(ctx, db, sw.Schema, sw.To) {
		return nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	started := time.Now()
	var atStart map[[2]int64]bool // the transactions open when the wait began
	rep := &snapshotReport{db: db, sw: sw, cfg: cfg}
	defer rep.end()
	for {
		trx, fresh, err := transactions(ctx, conn)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			cfg.Logger.Warn("cannot list the server's transactions (grant PROCESS): a transaction that took its snapshot before the swap and reads the table after it gets error 1412", "table", sw.From, "error", err)
			return nil
		case fresh && atStart == nil:
			atStart = map[[2]int64]bool{}
			for _, t := range trx {
				atStart[t.key()] = true
			}
		}
		var older []openTrx
		for _, t := range trx {
			if atStart[t.key()] {
				older = append(older, t)
			}
		}
		waiting, outlasted := splitByAge(older, cfg.SnapshotWait)
		switch {
		case fresh && len(waiting) == 0:
			rep.outlasted(ctx, outlasted)
			rep.over(time.Since(started))
			return nil
		case time.Since(started) > cfg.SnapshotWait+2*time.Second || lim.passed():
			// A list that stayed stale (or a clock step): the bound holds regardless.
			cfg.Logger.Warn("gave up waiting for transactions older than the cut-over", "table", sw.From, "fresh_list", fresh, "transactions", len(older))
			return nil
		case len(waiting) > 0:
			rep.waiting(ctx, threads(waiting))
		}
		select {
		case <-time.After(snapshotPoll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// snapshotReport tells the Observer (or, without one, the log) what the wait waits for.
type snapshotReport struct {
	db     *sql.DB
	sw     Swap
	cfg    Config
	update func(string, []lockwait.Session)
	done   func()
}

func (r *snapshotReport) waiting(ctx context.Context, ids []int64) {
	sessions, _ := lockwait.Sessions(ctx, r.db, ids)
	what := fmt.Sprintf("%d transaction(s) open since before the cut-over, which may read %s after the swap from an older snapshot (error 1412); each is waited for until it ends or has been open for %s", len(ids), r.sw.From, r.cfg.SnapshotWait)
	switch {
	case r.update != nil:
		r.update(what, sessions)
	case r.cfg.Observer != nil:
		r.update, r.done = r.cfg.Observer.Waiting(lockwait.Wait{Kind: lockwait.KindSnapshots, What: what, Blockers: sessions, BlockersCertain: true, Timeout: r.cfg.SnapshotWait})
	default:
		r.update = func(string, []lockwait.Session) {}
		r.cfg.Logger.Info("waiting for transactions older than the cut-over", "table", r.sw.From, "transactions", lockwait.Holders{Sessions: sessions, Certain: true}.String())
	}
}

// over logs the end of a wait that waited.
func (r *snapshotReport) over(waited time.Duration) {
	if r.update != nil {
		r.cfg.Logger.Info("transactions older than the cut-over have ended", "table", r.sw.From, "waited", waited.Round(time.Millisecond))
	}
}

func (r *snapshotReport) end() {
	if r.done != nil {
		r.done()
	}
}

// outlasted names the transactions that were not waited for: open longer than the bound.
func (r *snapshotReport) outlasted(ctx context.Context, trx []openTrx) {
	if len(trx) == 0 {
		return
	}
	sessions, _ := lockwait.Sessions(ctx, r.db, threads(trx))
	r.cfg.Logger.Warn(fmt.Sprintf("swapping with transactions open since before the cut-over, each for longer than %s (--snapshot-wait): if one of them reads %s before it ends, it gets error 1412 (or, where its snapshot is younger than the shadow, rows missing)", r.cfg.SnapshotWait, r.sw.From),
		"table", r.sw.From, "transactions", lockwait.Holders{Sessions: sessions, Certain: true}.String())
}

// transactions looks at the server's transactions once: the other sessions' (as snapshotLookup
// selects them), and whether the list was fresh (it shows the look's own transaction).
func transactions(ctx context.Context, conn *sql.Conn) ([]openTrx, bool, error) {
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return nil, false, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "COMMIT")
	rows, err := conn.QueryContext(ctx, snapshotLookup)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []openTrx
	fresh := false
	for rows.Next() {
		var t openTrx
		var now int64
		var own bool
		if err := rows.Scan(&t.thread, &t.began, &now, &own); err != nil {
			return nil, false, err
		}
		if own {
			fresh = true
			continue
		}
		t.age = time.Duration(max(now-t.began, 0)) * time.Second
		out = append(out, t)
	}
	return out, fresh, rows.Err()
}

// splitByAge parts the transactions into those younger than bound (waited for) and the others.
func splitByAge(trx []openTrx, bound time.Duration) (waiting, outlasted []openTrx) {
	for _, t := range trx {
		if t.age < bound {
			waiting = append(waiting, t)
		} else {
			outlasted = append(outlasted, t)
		}
	}
	return waiting, outlasted
}

func threads(trx []openTrx) []int64 {
	ids := make([]int64, 0, len(trx))
	for _, t := range trx {
		ids = append(ids, t.thread)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// isInnoDB reports whether schema.name is an InnoDB table (the swap's table to be).
func isInnoDB(ctx context.Context, db *sql.DB, schema, name string) bool {
	var engine sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&engine); err != nil {
		return true // unread: wait as for InnoDB, the cheaper mistake
	}
	return strings.EqualFold(engine.String, "InnoDB")
}
