package lockwait

import (
	"context"
	"database/sql"
	"strings"
)

// FindHolders names the sessions other than waiter that hold a metadata lock on one of tables, or
// the global read (backup) lock when that is what waiter waits for. It asks, in this order, the
// metadata_lock_info plugin (MariaDB; not loaded by default), performance_schema.metadata_locks
// (only when the wait/lock/metadata/sql/mdl instrument is on: off by default on MariaDB, on by
// default on MySQL 8), and else guesses from the process list (Certain false). own marks this
// process's connections. Errors of the lock tables only move on to the next source.
func FindHolders(ctx context.Context, db *sql.DB, waiter Session, tables []Table, own func(int64) bool) Holders {
	global := IsGlobalLockState(waiter.State)
	h := Holders{Certain: true}
	locks, err := fromMetadataLockInfo(ctx, db, tables, global)
	h.Source = SourceMetadataLockInfo
	if err != nil {
		locks, err = fromPerformanceSchema(ctx, db, tables)
		h.Source = SourcePerformanceSchema
	}
	if err == nil {
		var ids []int64
		for id := range locks {
			if id != waiter.ID {
				ids = append(ids, id)
			}
		}
		sessions, err := Sessions(ctx, db, ids)
		if err == nil {
			for i := range sessions {
				sessions[i].Lock, sessions[i].Own = locks[sessions[i].ID], own(sessions[i].ID)
			}
			sortLongest(sessions)
			h.Sessions = sessions
			return h
		}
	}
	return fromProcessList(ctx, db, waiter, tables, own, global)
}

// IsGlobalLockState reports a process-list state that waits for the server-wide read lock a
// backup's FLUSH TABLES WITH READ LOCK (MySQL) or its backup lock (MariaDB 10.4+) holds: it blocks
// every write, whatever table the waiting statement names.
func IsGlobalLockState(state string) bool {
	s := strings.ToLower(state)
	return strings.Contains(s, "global read lock") || strings.Contains(s, "backup lock")
}

// errUnavailable means a lock table exists but does not record metadata locks.
type errUnavailable struct{ what string }

func (e errUnavailable) Error() string { return e.what + " does not record metadata locks" }

// fromMetadataLockInfo returns holder connection ids with their lock modes.
func fromMetadataLockInfo(ctx context.Context, db *sql.DB, tables []Table, global bool) (map[int64]string, error) {
	q := `SELECT THREAD_ID, LOCK_MODE FROM information_schema.METADATA_LOCK_INFO WHERE `
	var args []any
	if global {
		q += `LOCK_MODE LIKE 'MDL_BACKUP_FTWRL%' OR LOCK_MODE LIKE 'MDL_BACKUP_BLOCK%' OR (LOCK_TYPE = 'Global read lock' AND LOCK_MODE = 'MDL_SHARED')`
	} else {
		cond, targs := tableCondition("TABLE_SCHEMA", "TABLE_NAME", tables)
		q += cond
		args = targs
	}
	return holderRows(ctx, db, q, args...)
}

// fromPerformanceSchema returns holder connection ids with their lock types, when the metadata
// lock instrument is on (otherwise the table is empty, which would read as "nobody").
func fromPerformanceSchema(ctx context.Context, db *sql.DB, tables []Table) (map[int64]string, error) {
	var enabled string
	if err := db.QueryRowContext(ctx, `SELECT ENABLED FROM performance_schema.setup_instruments
		WHERE NAME = 'wait/lock/metadata/sql/mdl'`).Scan(&enabled); err != nil {
		return nil, err
	}
	if !strings.EqualFold(enabled, "YES") {
		return nil, errUnavailable{"performance_schema (instrument wait/lock/metadata/sql/mdl is off)"}
	}
	cond, args := tableCondition("ml.OBJECT_SCHEMA", "ml.OBJECT_NAME", tables)
	return holderRows(ctx, db, `SELECT th.PROCESSLIST_ID, ml.LOCK_TYPE FROM performance_schema.metadata_locks ml
		JOIN performance_schema.threads th ON th.THREAD_ID = ml.OWNER_THREAD_ID
		WHERE ml.LOCK_STATUS = 'GRANTED' AND ((ml.OBJECT_TYPE = 'TABLE' AND (`+cond+`))
		OR (ml.OBJECT_TYPE = 'GLOBAL' AND ml.LOCK_TYPE = 'SHARED'))`, args...)
}

func tableCondition(schemaCol, nameCol string, tables []Table) (string, []any) {
	var parts []string
	var args []any
	for _, t := range tables {
		parts = append(parts, "("+schemaCol+" = ? AND "+nameCol+" = ?)")
		args = append(args, t.Schema, t.Name)
	}
	if len(parts) == 0 {
		return "FALSE", nil
	}
	return strings.Join(parts, " OR "), args
}

func holderRows(ctx context.Context, db *sql.DB, q string, args ...any) (map[int64]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id sql.NullInt64
		var mode string
		if err := rows.Scan(&id, &mode); err != nil {
			return nil, err
		}
		if id.Valid {
			if prev := out[id.Int64]; prev != "" && prev != mode {
				mode = prev + "," + mode
			}
			out[id.Int64] = mode
		}
	}
	return out, rows.Err()
}

// fromProcessList guesses the holders without lock tables: sessions running a statement that names
// one of the tables (and not waiting for a lock themselves), and sessions idle in the table's
// database since before the wait began, which may hold a LOCK TABLES or an open transaction's
// metadata lock. For the global read lock: every idle session, in any database and however
// briefly idle. A backup's FLUSH TABLES WITH READ LOCK blocks writes from its start but returns
// only once the running statements are done and the tables flushed, so its session has been idle
// for less time than its victims have waited (by the length of the longest statement it waited
// for): requiring it to be idle since before the wait named nobody.
func fromProcessList(ctx context.Context, db *sql.DB, waiter Session, tables []Table, own func(int64) bool, global bool) Holders {
	h := Holders{Source: SourceProcessList, Note: noLockInfo}
	all, err := processList(ctx, db, " WHERE ID <> CONNECTION_ID()")
	if err != nil {
		h.Note = "cannot read the process list: " + err.Error()
		return h
	}
	for _, s := range all {
		if s.ID == waiter.ID || own(s.ID) || s.Command == "Daemon" || s.Command == "Binlog Dump" {
			continue
		}
		idleSinceBefore := s.Command == "Sleep" && s.Time >= waiter.Time
		switch {
		case global && s.Command == "Sleep":
		case !global && idleSinceBefore && inSchema(s.DB, tables):
		case !global && s.Command != "Sleep" && !IsLockState(s.State) && names(s, tables):
		default:
			continue
		}
		h.Sessions = append(h.Sessions, s)
	}
	sortLongest(h.Sessions)
	return h
}

func inSchema(db string, tables []Table) bool {
	for _, t := range tables {
		if strings.EqualFold(db, t.Schema) {
			return true
		}
	}
	return false
}

// names reports whether the session's statement mentions one of the tables (a text match, as in
// cutover.LongQueries: the name appears, and the session's database or the statement names the
// table's database).
func names(s Session, tables []Table) bool {
	info := strings.ToLower(s.Info)
	for _, t := range tables {
		if strings.Contains(info, strings.ToLower(t.Name)) &&
			(strings.EqualFold(s.DB, t.Schema) || strings.Contains(info, strings.ToLower(t.Schema))) {
			return true
		}
	}
	return false
}
