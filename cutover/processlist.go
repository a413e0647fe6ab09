package cutover

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// A statement is long when the statement holding its locks has run longer than the limit. That is
// not always what the process list says. A CALL's statements each take and release their own
// locks, but MariaDB's process list gives a session inside a procedure the age of the whole CALL
// beside the text of the statement running in it, and performance_schema lists the CALL itself as
// a running statement: a procedure looping over short writes looked like one statement running
// for minutes. A stored function's or a trigger's statements are the other way round: they run
// under the locks their calling statement took, whatever their own age. So each session is judged
// by its lock-holding statement:
//
//   - performance_schema's events_statements_current, where its statements are timed (MySQL's
//     default; on MariaDB the consumer is off unless the DBA turned it on): the session's running
//     statements, nested. The lock holder is the outermost one that is not a CALL or an event
//     body; its age and text count.
//   - otherwise MariaDB's process list with QUERY_ID, which changes with every statement of a
//     stored program: a session whose QUERY_ID changes while it is watched for the limit is
//     stepping through short statements, and only one whose QUERY_ID stays the same for the whole
//     limit counts (TIME_MS alone is the CALL's age).
//   - otherwise the process list's whole seconds (MySQL without performance_schema's statements,
//     whose information_schema.PROCESSLIST TIME is already the age of the statement inside a
//     procedure).
//
// The process list is read from the first source that answers. MariaDB's
// information_schema.PROCESSLIST has TIME_MS and QUERY_ID. MySQL's has whole seconds only, and
// fails as a whole (Error 3854, "Cannot convert string ... from utf8mb4 to utf8mb3") while any
// session's statement text is not valid UTF-8, as an application's statement with binary values
// is; performance_schema.threads does not, but its PROCESSLIST_TIME is a CALL's whole age (which
// over-reports: it only delays the cut-over).
const (
	skipCommands = `('Sleep', 'Binlog Dump', 'Binlog Dump GTID', 'Daemon')`
	isMariaDB    = `SELECT ID, COALESCE(DB, ''), COALESCE(INFO, ''), COALESCE(STATE, ''), TIME_MS * 1000, QUERY_ID, FALSE FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ` + skipCommands
	psThreads = `SELECT PROCESSLIST_ID, COALESCE(PROCESSLIST_DB, ''), COALESCE(PROCESSLIST_INFO, ''), COALESCE(PROCESSLIST_STATE, ''),
		COALESCE(PROCESSLIST_TIME, 0) * 1000000, 0, TRUE
		FROM performance_schema.threads WHERE PROCESSLIST_ID IS NOT NULL AND PROCESSLIST_ID <> CONNECTION_ID()
		AND PROCESSLIST_COMMAND NOT IN ` + skipCommands
	isSeconds = `SELECT ID, COALESCE(DB, ''), COALESCE(INFO, ''), COALESCE(STATE, ''), TIME * 1000000, 0, TRUE FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ` + skipCommands
)

// session is one connection's running statement as the process list shows it.
type session struct {
	id      int64
	db      string
	text    string
	state   string
	age     time.Duration
	queryID int64 // 0: the server does not say
	coarse  bool  // age is in whole seconds
}

// LongQueries lists connections whose lock-holding statement (see above) mentions the table and has
// run longer than age. The table counts as mentioned when its name appears in the statement and
// the session's default database is the table's or the statement names that database too. It is a
// text match: it may over-report (a column with the same name), which only delays the cut-over.
// A session waiting for a lock does not count (waitsForLock). With age 0 it lists every session
// running a statement on the table, waiting ones too, without watching.
func LongQueries(ctx context.Context, db *sql.DB, schema, name string, age time.Duration) ([]int64, error) {
	sessions, err := processList(ctx, db)
	if err != nil {
		return nil, err
	}
	holders, timed := runningStatements(ctx, db)
	var ids []int64
	watch := map[int64]int64{} // session → QUERY_ID
	for _, s := range sessions {
		if age > 0 && waitsForLock(s.state) {
			continue // queued behind whoever holds the table: that one is the blocker, and is judged itself
		}
		if h, ok := holders[s.id]; timed && ok {
			if h.none {
				continue // between two statements of a stored program: it holds no table lock
			}
			s.text, s.age, s.coarse, s.queryID = h.text, h.age, false, 0
		}
		if !mentions(s, schema, name) || !older(s, age) {
			continue
		}
		if s.queryID != 0 && age > 0 {
			watch[s.id] = s.queryID
			continue
		}
		ids = append(ids, s.id)
	}
	if len(watch) > 0 {
		still, err := sameStatement(ctx, db, watch, age)
		if err != nil {
			return nil, err
		}
		ids = append(ids, still...)
	}
	return ids, nil
}

// waitsForLock reports a session waiting for a table, metadata or global read lock: it holds
// nothing on the table yet. Counting it would keep the cut-over from even trying while an idle
// LOCK TABLES or a backup's lock holds the table, and name the waiting application instead of the
// holder (a failed attempt names the holder).
func waitsForLock(state string) bool {
	s := strings.ToLower(state)
	return strings.HasPrefix(s, "waiting for") && strings.Contains(s, "lock")
}

// older reports whether s's statement has run at least limit; whole seconds are rounded up
// (TIME >= 0 would match every running query).
func older(s session, limit time.Duration) bool {
	if s.coarse {
		return s.age >= max(time.Second, limit.Round(time.Second)) || limit == 0
	}
	return s.age >= limit
}

// tableLockWaiters counts connections whose statement on the table has waited at least age for
// the table's own lock (MyISAM's table-level lock, not a metadata lock): another session holds the
// table with LOCK TABLES or a long statement.
func tableLockWaiters(ctx context.Context, db *sql.DB, schema, name string, age time.Duration) (int, error) {
	sessions, err := processList(ctx, db)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range sessions {
		if strings.EqualFold(s.state, "Waiting for table level lock") && mentions(s, schema, name) && older(s, age) {
			n++
		}
	}
	return n, nil
}

func mentions(s session, schema, name string) bool {
	text := strings.ToLower(s.text)
	return strings.Contains(text, strings.ToLower(name)) && (strings.EqualFold(s.db, schema) || strings.Contains(text, strings.ToLower(schema)))
}

func processList(ctx context.Context, db *sql.DB) ([]session, error) {
	var errs []error
	for _, q := range []string{isMariaDB, isSeconds, psThreads} {
		list, err := readSessions(ctx, db, q)
		if err == nil {
			return list, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func readSessions(ctx context.Context, db *sql.DB, query string) ([]session, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []session
	for rows.Next() {
		var s session
		var micros float64
		if err := rows.Scan(&s.id, &s.db, &s.text, &s.state, &micros, &s.queryID, &s.coarse); err != nil {
			return nil, err
		}
		s.age = time.Duration(micros) * time.Microsecond
		out = append(out, s)
	}
	return out, rows.Err()
}

// watchEvery spaces the process-list reads while sameStatement watches sessions.
const watchEvery = 25 * time.Millisecond

// sameStatement watches sessions (id → QUERY_ID) for limit and returns those still running the
// same statement at the end: their statement has run at least limit. A session whose QUERY_ID
// changes, or that ends its statement, is dropped as soon as that is seen.
func sameStatement(ctx context.Context, db *sql.DB, watch map[int64]int64, limit time.Duration) ([]int64, error) {
	deadline := time.Now().Add(limit)
	for len(watch) > 0 {
		wait := min(watchEvery, time.Until(deadline))
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		list, err := readSessions(ctx, db, isMariaDB)
		if err != nil {
			return nil, err
		}
		now := map[int64]int64{}
		for _, s := range list {
			now[s.id] = s.queryID
		}
		for id, q := range watch {
			if now[id] != q {
				delete(watch, id)
			}
		}
		if !time.Now().Before(deadline) {
			break
		}
	}
	var ids []int64
	for id := range watch {
		ids = append(ids, id)
	}
	return ids, nil
}
