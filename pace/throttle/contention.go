package throttle

import (
	"context"
	"database/sql"
)

// Contention watches the server's Table_locks_waited counter: it grows whenever a statement had
// to wait for a MyISAM table lock, which while enginemig copies or verifies mostly means "waited
// for us". Copy and verify use it to work in long chunks while nobody waits and to back off as
// soon as somebody does.
type Contention struct {
	db   *sql.DB
	last int64
	ok   bool
}

// NewContention watches through db.
func NewContention(db *sql.DB) *Contention { return &Contention{db: db} }

// Contended reports whether any lock wait happened since the previous call. Errors count as
// contended: when in doubt, stay gentle. Not safe for concurrent use.
func (l *Contention) Contended(ctx context.Context) bool {
	var name string
	var v int64
	if err := l.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Table_locks_waited'").Scan(&name, &v); err != nil {
		return true
	}
	prev, had := l.last, l.ok
	l.last, l.ok = v, true
	return !had || v > prev
}
