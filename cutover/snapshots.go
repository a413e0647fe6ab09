package cutover

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/pace/lockwait"
)

// Snapshots older than the table swapped in. InnoDB refuses a read of a table it created after
// the reader's snapshot (error 1412, "Table definition has changed"), by any index, and a snapshot
// younger than the table but older than its rows sees them missing; a RENAME changes neither. A
// transaction of the application that took its snapshot before the swap (autocommit off, a read
// of any InnoDB table) and reads the table only after it would get one or the other
// (docs/how-it-works.md, "Snapshots older than the InnoDB table"). So before its first attempt the
// swap of an InnoDB table waits until every transaction that began before the wait has ended, or
// has been open for Config.SnapshotWait: a web request's transaction ends within a moment, while
// one open longer (a session idle in a transaction, a dump) would hold every table's swap to no
// end; those are named in a warning instead. Once none is left, no older snapshot can come back:
// a later transaction takes a later one.
//
// The transactions are read from information_schema.INNODB_TRX, which lists every transaction
// InnoDB has started, read-only ones too, with the second it began (SHOW ENGINE INNODB STATUS
// prints read views, but MySQL leaves read-only transactions out of it). A snapshot is never
// older than its transaction, so "began at or before the wait's second" is a sure superset. Only
// REPEATABLE READ transactions keep a snapshot between statements, and a single autocommit
// statement's ends with it. The server refills that list only after 100 ms in which nobody read
// it, so each look runs in a transaction of its own, which the list must show for the look to
// count: a list left stale by frequent readers is never taken for a fresh one.
const (
	snapshotPoll   = 200 * time.Millisecond
	snapshotLookup = `SELECT trx_mysql_thread_id, UNIX_TIMESTAMP(trx_started), UNIX_TIMESTAMP(), trx_mysql_thread_id = CONNECTION_ID()
		FROM information_schema.INNODB_TRX
		WHERE trx_mysql_thread_id = CONNECTION_ID() OR (trx_isolation_level = 'REPEATABLE READ' AND trx_autocommit_non_locking = 0)`
)

// openTrx is a transaction of another session that began at or before the wait did.
type openTrx struct {
	thread int64
	age    time.Duration // whole seconds
}

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
	since, started := int64(0), time.Now()
	var update func(string, []lockwait.Session)
	for {
		now, older, fresh, err := olderTransactions(ctx, conn, since)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			cfg.Logger.Warn("cannot list the server's transactions (grant PROCESS): a transaction that took its snapshot before the swap and reads the table after it gets error 1412", "table", sw.From, "error", err)
			return nil
		case since == 0 && fresh:
			since = now
		}
		waiting, outlasted := splitByAge(older, cfg.SnapshotWait)
		switch {
		case fresh && len(waiting) == 0:
			warnOutlasted(ctx, db, sw, cfg, outlasted)
			if update != nil {
				cfg.Logger.Info("transactions older than the cut-over have ended", "table", sw.From, "waited", time.Since(started).Round(time.Millisecond))
			}
			return nil
		case time.Since(started) > cfg.SnapshotWait+2*time.Second || lim.passed():
			// A list that stayed stale (or a clock step): the bound holds regardless.
			cfg.Logger.Warn("gave up waiting for transactions older than the cut-over", "table", sw.From, "fresh_list", fresh, "transactions", len(waiting)+len(outlasted))
			return nil
		case len(waiting) > 0:
			ids := threads(waiting)
			sessions, _ := lockwait.Sessions(ctx, db, ids)
			what := fmt.Sprintf("%d transaction(s) that began before the cut-over and may read %s after the swap from an older snapshot (error 1412); each is waited for until it ends or has been open for %s", len(ids), sw.From, cfg.SnapshotWait)
			switch {
			case update != nil:
				update(what, sessions)
			case cfg.Observer != nil:
				var done func()
				update, done = cfg.Observer.Waiting(lockwait.Wait{Kind: lockwait.KindSnapshots, What: what, Blockers: sessions, BlockersCertain: true, Timeout: cfg.SnapshotWait})
				defer done()
			default:
				update = func(string, []lockwait.Session) {}
				cfg.Logger.Info("waiting for transactions older than the cut-over", "table", sw.From, "transactions", lockwait.Holders{Sessions: sessions, Certain: true}.String())
			}
		}
		select {
		case <-time.After(snapshotPoll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// olderTransactions looks at the server's transactions once: the server's clock (Unix seconds),
// the other sessions' transactions that began at or before since (all of them while since is 0),
// and whether the list was fresh (it shows the look's own transaction).
func olderTransactions(ctx context.Context, conn *sql.Conn, since int64) (int64, []openTrx, bool, error) {
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return 0, nil, false, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "COMMIT")
	rows, err := conn.QueryContext(ctx, snapshotLookup)
	if err != nil {
		return 0, nil, false, err
	}
	defer rows.Close()
	var now int64
	var older []openTrx
	fresh := false
	for rows.Next() {
		var thread, began int64
		var own bool
		if err := rows.Scan(&thread, &began, &now, &own); err != nil {
			return 0, nil, false, err
		}
		switch {
		case own:
			fresh = true
		case since == 0 || began <= since:
			older = append(older, openTrx{thread: thread, age: time.Duration(max(now-began, 0)) * time.Second})
		}
	}
	return now, older, fresh, rows.Err()
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

// warnOutlasted names the transactions that were not waited for: open longer than the bound.
func warnOutlasted(ctx context.Context, db *sql.DB, sw Swap, cfg Config, trx []openTrx) {
	if len(trx) == 0 {
		return
	}
	sessions, _ := lockwait.Sessions(ctx, db, threads(trx))
	cfg.Logger.Warn(fmt.Sprintf("swapping with transactions open since before the cut-over, each for longer than %s (--snapshot-wait): if one of them reads %s before it ends, it gets error 1412 (or, where its snapshot is younger than the shadow, rows missing)", cfg.SnapshotWait, sw.From),
		"table", sw.From, "transactions", lockwait.Holders{Sessions: sessions, Certain: true}.String())
}

// isInnoDB reports whether schema.name is an InnoDB table (the swap's table to be).
func isInnoDB(ctx context.Context, db *sql.DB, schema, name string) bool {
	var engine sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&engine); err != nil {
		return true // unread: wait as for InnoDB, the cheaper mistake
	}
	return strings.EqualFold(engine.String, "InnoDB")
}
