package cutover

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"time"
)

// The process list is read from the first source that answers. MariaDB's
// information_schema.PROCESSLIST has TIME_MS. MySQL's has whole seconds only, and fails as a
// whole (Error 3854, "Cannot convert string ... from utf8mb4 to utf8mb3") while any session's
// statement text is not valid UTF-8, as an application's statement with binary values is; its
// performance_schema does neither: events_statements_current gives a running statement's age in
// picoseconds (TIMER_WAIT is the time so far), threads the text and state.
const (
	skipCommands = `('Sleep', 'Binlog Dump', 'Binlog Dump GTID', 'Daemon')`
	isTimeMS     = `SELECT ID, COALESCE(DB, ''), COALESCE(INFO, '') FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ` + skipCommands + ` AND TIME_MS >= ?`
	psStatements = `SELECT t.PROCESSLIST_ID, COALESCE(t.PROCESSLIST_DB, ''), COALESCE(t.PROCESSLIST_INFO, '')
		FROM performance_schema.events_statements_current s JOIN performance_schema.threads t USING (THREAD_ID)
		WHERE t.PROCESSLIST_ID <> CONNECTION_ID() AND t.PROCESSLIST_COMMAND NOT IN ` + skipCommands + `
		AND s.END_EVENT_ID IS NULL AND s.TIMER_WAIT >= ?`
	isTime = `SELECT ID, COALESCE(DB, ''), COALESCE(INFO, '') FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ` + skipCommands + ` AND TIME >= ?`
)

// LongQueries lists connections whose current statement mentions the table and has run longer
// than age. The table counts as mentioned when its name appears in the statement and the session's
// default database is the table's or the statement names that database too. It is a text match:
// it may over-report (a column with the same name), which only delays the cut-over.
func LongQueries(ctx context.Context, db *sql.DB, schema, name string, age time.Duration) ([]int64, error) {
	sources := []struct {
		query string
		arg   int64
	}{
		{isTimeMS, age.Milliseconds()},
		{psStatements, age.Nanoseconds() * 1000},
		// Whole seconds, rounded up (TIME >= 0 would match every running query).
		{isTime, max(1, int64(math.Ceil(age.Seconds())))},
	}
	var errs []error
	for _, src := range sources {
		ids, err := longQueries(ctx, db, src.query, src.arg, schema, name)
		if err == nil {
			return ids, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func longQueries(ctx context.Context, db *sql.DB, query string, arg int64, schema, name string) ([]int64, error) {
	rows, err := db.QueryContext(ctx, query, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	table, database := strings.ToLower(name), strings.ToLower(schema)
	for rows.Next() {
		var id int64
		var sessionDB, info string
		if err := rows.Scan(&id, &sessionDB, &info); err != nil {
			return nil, err
		}
		info = strings.ToLower(info)
		if strings.Contains(info, table) && (strings.EqualFold(sessionDB, schema) || strings.Contains(info, database)) {
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}
