// Package lockwait finds out what a session of enginemig is waiting for and which sessions hold
// it, from what the server offers: the metadata_lock_info plugin, performance_schema's metadata
// locks, or (without either) the process list. It only reads; it never changes a server setting.
package lockwait

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Session is one server connection as the process list shows it.
type Session struct {
	ID      int64         `json:"id"`
	User    string        `json:"user"`
	Host    string        `json:"host,omitempty"`
	DB      string        `json:"db,omitempty"`
	Command string        `json:"command"`
	State   string        `json:"state,omitempty"`
	Info    string        `json:"statement,omitempty"` // its running statement, shortened
	Time    time.Duration `json:"time_ns"`             // how long it has been in its current command
	// Lock is the metadata lock it holds, when a lock table said so (e.g. MDL_SHARED_NO_READ_WRITE).
	Lock string `json:"lock,omitempty"`
	// Own marks a connection of this enginemig process.
	Own bool `json:"own,omitempty"`
}

// String describes the session for a log line or an error message.
func (s Session) String() string {
	if s.Command == "" {
		return fmt.Sprintf("connection %d (not visible to this account: grant PROCESS)", s.ID)
	}
	b := fmt.Sprintf("connection %d (user %s", s.ID, s.User)
	if s.Host != "" {
		b += "@" + s.Host
	}
	b += fmt.Sprintf(", %s for %s", s.Command, s.Time.Round(time.Second))
	if s.State != "" {
		b += ", " + s.State
	}
	if s.Info != "" {
		b += ": " + s.Info
	}
	if s.Lock != "" {
		b += ", holds " + s.Lock
	}
	if s.Own {
		b += ", enginemig's own"
	}
	return b + ")"
}

// Table names a table whose locks matter.
type Table struct{ Schema, Name string }

// Source says where the holders came from.
const (
	SourceMetadataLockInfo  = "metadata_lock_info"
	SourcePerformanceSchema = "performance_schema"
	SourceProcessList       = "processlist"
)

// Holders are the sessions that hold (or, from the process list alone, may hold) what a waiter
// waits for.
type Holders struct {
	Sessions []Session `json:"sessions"`
	Source   string    `json:"source"`
	// Certain is true when a lock table named them; from the process list they are candidates.
	Certain bool `json:"certain"`
	// Note says how to get certainty when it is missing.
	Note string `json:"note,omitempty"`
}

// String lists the holders (at most three) for a message.
func (h Holders) String() string {
	if len(h.Sessions) == 0 {
		if h.Note != "" {
			return "holder unknown (" + h.Note + ")"
		}
		return "holder unknown"
	}
	var parts []string
	for _, s := range h.Sessions[:min(3, len(h.Sessions))] {
		parts = append(parts, s.String())
	}
	out := strings.Join(parts, "; ")
	if n := len(h.Sessions) - 3; n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	if !h.Certain {
		out = "possibly " + out
		if h.Note != "" {
			out += " (" + h.Note + ")"
		}
	}
	return out
}

// noLockInfo is the note for holders guessed from the process list.
const noLockInfo = "the server does not say who holds it: INSTALL SONAME 'metadata_lock_info', or enable performance_schema's wait/lock/metadata/sql/mdl instrument, to name the holder"

// IsLockState reports whether a process-list state means the session waits for a lock held by
// another (MariaDB and MySQL: "Waiting for table metadata lock", "Waiting for table level lock",
// "Waiting for global read lock", "Waiting for backup lock", "Waiting for table flush", ...).
func IsLockState(state string) bool {
	s := strings.ToLower(state)
	return strings.HasPrefix(s, "waiting for") && (strings.Contains(s, "lock") || strings.Contains(s, "flush")) ||
		s == "locked" || s == "table lock"
}

const processColumns = `ID, COALESCE(USER, ''), COALESCE(HOST, ''), COALESCE(DB, ''), COALESCE(COMMAND, ''),
	COALESCE(STATE, ''), LEFT(COALESCE(INFO, ''), 200)`

// Waiting lists the sessions for which own is true that have waited for a lock at least minAge.
// MySQL has no TIME_MS: there the age is in whole seconds.
func Waiting(ctx context.Context, db *sql.DB, own func(id int64) bool, minAge time.Duration) ([]Session, error) {
	const where = ` WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump')
		AND (STATE LIKE 'Waiting for%' OR STATE IN ('Locked', 'Table lock'))`
	sessions, err := processList(ctx, db, where)
	if err != nil {
		return nil, fmt.Errorf("read the process list: %w", err)
	}
	var out []Session
	for _, s := range sessions {
		if own(s.ID) && IsLockState(s.State) && s.Time >= minAge {
			s.Own = true
			out = append(out, s)
		}
	}
	return out, nil
}

// Sessions reads the process-list rows of ids (those this account can see), in the order given.
func Sessions(ctx context.Context, db *sql.DB, ids []int64) ([]Session, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	found, err := processList(ctx, db, " WHERE ID IN ("+in+")", args...)
	if err != nil {
		return nil, err
	}
	out := make([]Session, len(ids))
	for i, id := range ids {
		out[i] = Session{ID: id}
		for _, s := range found {
			if s.ID == id {
				out[i] = s
			}
		}
	}
	return out, nil
}

// processList reads the process list rows that where (on its standard column names) selects,
// from the first source that answers: MariaDB's information_schema.PROCESSLIST with TIME_MS;
// MySQL's, in whole seconds; then performance_schema.threads, because MySQL's
// information_schema.PROCESSLIST fails as a whole (Error 3854) while any session's statement text
// is not valid UTF-8, as an application's statement with binary values is (seen on MySQL 9.7:
// without this source, a rollback waiting on another client's lock was never reported, and
// --lock-timeout never fired).
func processList(ctx context.Context, db *sql.DB, where string, args ...any) ([]Session, error) {
	const threads = `(SELECT PROCESSLIST_ID AS ID, PROCESSLIST_USER AS USER, PROCESSLIST_HOST AS HOST,
		PROCESSLIST_DB AS DB, PROCESSLIST_COMMAND AS COMMAND, PROCESSLIST_STATE AS STATE, PROCESSLIST_INFO AS INFO,
		PROCESSLIST_TIME AS TIME FROM performance_schema.threads WHERE PROCESSLIST_ID IS NOT NULL) AS pl`
	var errs []error
	for _, from := range []string{
		", TIME_MS / 1000 FROM information_schema.PROCESSLIST",
		", TIME FROM information_schema.PROCESSLIST",
		", TIME FROM " + threads,
	} {
		found, err := query(ctx, db, "SELECT "+processColumns+from+where, args...)
		if err == nil {
			return found, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func query(ctx context.Context, db *sql.DB, q string, args ...any) ([]Session, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var s Session
		var secs float64
		if err := rows.Scan(&s.ID, &s.User, &s.Host, &s.DB, &s.Command, &s.State, &s.Info, &secs); err != nil {
			return nil, err
		}
		s.Info = strings.Join(strings.Fields(s.Info), " ")
		s.Time = time.Duration(secs * float64(time.Second))
		out = append(out, s)
	}
	return out, rows.Err()
}

// sortLongest orders sessions by how long they have been at it, longest first.
func sortLongest(s []Session) {
	slices.SortStableFunc(s, func(a, b Session) int { return int(b.Time - a.Time) })
}

// Kinds of Wait.
const (
	KindLock        = "lock"         // a statement of enginemig waits for a lock another session holds
	KindLongQueries = "long_queries" // the cut-over waits for long statements on the table to end
	KindSnapshots   = "snapshots"    // the cut-over waits for transactions begun before it to end
	KindThrottle    = "throttle"     // the copy waits for the throttle (replica lag, busy server, pause)
	KindPostponed   = "postponed"    // the cut-over waits for the postpone file to go
	KindDisk        = "disk"         // a step that writes much waits for free disk space over the reserve
	KindCutover     = "cutover"      // cut-over attempts fail (the table lock not granted, replay behind): apply retries
	KindWindow      = "window"       // the cut-over waits for its time window (--cutover-window) to open
)

// Wait is something enginemig is waiting on, as logs, status and metrics show it.
type Wait struct {
	Kind string `json:"kind"`
	// What is waited for, in words (e.g. "metadata lock on `db`.`t`", "replica db2 lags 3s").
	What   string        `json:"what"`
	Since  time.Time     `json:"since"`
	Waited time.Duration `json:"waited_ns"`
	// Waiter is enginemig's waiting connection and Statement what it runs (lock waits).
	Waiter    int64  `json:"waiter_connection,omitempty"`
	Statement string `json:"statement,omitempty"`
	// Blockers hold what is waited for (lock waits, long queries); BlockersCertain says whether
	// a lock table named them or they were guessed from the process list (Note says why).
	Blockers        []Session `json:"blockers,omitempty"`
	BlockersCertain bool      `json:"blockers_certain,omitempty"`
	Note            string    `json:"note,omitempty"`
	// Timeout is how long this wait may last before apply gives up (0: as long as it takes).
	Timeout time.Duration `json:"timeout_ns,omitempty"`
}

// Mentions reports whether the session's statement names one of the tables as enginemig writes
// them (backquoted), which tells one migration's statements from another's in the same process.
func (s Session) Mentions(tables []Table) bool {
	info := strings.ToLower(s.Info)
	for _, t := range tables {
		if strings.Contains(info, strings.ToLower("`"+strings.ReplaceAll(t.Name, "`", "``")+"`")) {
			return true
		}
	}
	return false
}
