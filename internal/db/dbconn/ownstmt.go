package dbconn

import (
	"context"
	"database/sql/driver"
)

// ownStmt is a prepared statement of an own connection: each execution is a statement the
// server counts against the account (MAX_QUERIES_PER_HOUR), so it is counted here too.
type ownStmt struct {
	driver.Stmt
	use  *usage
	conn driver.Conn // its connection, whose argument checks the bare statement used
}

func (s *ownStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.use.statements.Add(1)
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return s.Stmt.Exec(values(args)) //lint:ignore SA1019 only for a driver without StmtExecContext
}

func (s *ownStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.use.statements.Add(1)
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return s.Stmt.Query(values(args)) //lint:ignore SA1019 only for a driver without StmtQueryContext
}

// CheckNamedValue checks arguments as database/sql did for the bare statement: with the
// statement's own checker, else its connection's (the driver's conversions, not database/sql's
// defaults).
func (s *ownStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	if n, ok := s.conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func values(args []driver.NamedValue) []driver.Value {
	v := make([]driver.Value, len(args))
	for i, a := range args {
		v[i] = a.Value
	}
	return v
}
