package cutover

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// psCurrent lists every running statement of every connection, nested statements included
// (NESTING_EVENT_ID points to the statement that runs them), with its time so far.
const psCurrent = `SELECT t.PROCESSLIST_ID, t.PROCESSLIST_ID = CONNECTION_ID(), s.EVENT_ID, COALESCE(s.NESTING_EVENT_ID, 0),
	s.EVENT_NAME, COALESCE(s.SQL_TEXT, ''), COALESCE(s.TIMER_WAIT, -1)
	FROM performance_schema.events_statements_current s JOIN performance_schema.threads t USING (THREAD_ID)
	WHERE t.PROCESSLIST_ID IS NOT NULL AND s.END_EVENT_ID IS NULL`

// statement is one row of psCurrent.
type statement struct {
	id, parent int64
	event      string
	text       string
	age        time.Duration
}

// holder is the statement whose locks a session holds now; none when the session runs only a
// CALL or event body between two of its statements.
type holder struct {
	text string
	age  time.Duration
	none bool
}

// runningStatements returns each connection's lock-holding statement from performance_schema,
// and whether performance_schema times statements at all: this very query must be listed with
// its time, or the table says nothing (consumer or instruments off, no privilege) and the caller
// reads the process list instead. A connection missing from a timed list is not instrumented
// (setup_actors, setup_threads): the caller judges it by the process list.
func runningStatements(ctx context.Context, db *sql.DB) (map[int64]holder, bool) {
	rows, err := db.QueryContext(ctx, psCurrent)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	bySession := map[int64][]statement{}
	timed := false
	for rows.Next() {
		var conn int64
		var self bool
		var st statement
		var picos int64
		if err := rows.Scan(&conn, &self, &st.id, &st.parent, &st.event, &st.text, &picos); err != nil {
			return nil, false
		}
		if self {
			timed = picos >= 0
			continue
		}
		st.age = time.Duration(picos / 1000)
		bySession[conn] = append(bySession[conn], st)
	}
	if rows.Err() != nil || !timed {
		return nil, false
	}
	out := map[int64]holder{}
	for conn, stmts := range bySession {
		out[conn] = lockHolder(stmts)
	}
	return out, true
}

// lockHolder walks a session's statements from the outermost inwards and returns the first that
// takes locks of its own for its whole run: not a CALL or an event body, whose statements each
// lock on their own. Everything nested below it (a function's or a trigger's statements) runs under
// its locks, so its age is theirs. A session inside a CALL between two statements has none.
func lockHolder(stmts []statement) holder {
	ids := map[int64]bool{}
	child := map[int64]statement{}
	for _, s := range stmts {
		ids[s.id] = true
	}
	var cur statement
	found := false
	for _, s := range stmts {
		if !ids[s.parent] {
			cur, found = s, true // the outermost
		} else {
			child[s.parent] = s
		}
	}
	for found {
		if !passesLocksOn(cur) {
			return holder{text: cur.text, age: cur.age}
		}
		cur, found = child[cur.id]
	}
	return holder{none: true}
}

// passesLocksOn reports statements that run other statements each with locks of its own: CALL
// (at the top, or a statement of a procedure that calls another) and a scheduled event's body.
func passesLocksOn(s statement) bool {
	switch s.event {
	case "statement/sql/call_procedure", "statement/scheduler/event":
		return true
	case "statement/sp/stmt":
		return strings.HasPrefix(strings.ToUpper(strings.TrimSpace(s.text)), "CALL")
	}
	return false
}
