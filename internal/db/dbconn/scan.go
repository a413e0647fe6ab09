package dbconn

import (
	"context"
	"database/sql"
)

// Scanner is a *sql.Row or *sql.Rows.
type Scanner interface {
	Scan(dest ...any) error
}

// ScanValues scans a row of n columns into fresh values as the driver returns them (database/sql
// copies []byte for *any destinations, so the values outlive the row).
func ScanValues(s Scanner, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := s.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, nil
}

// Querier reads: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Execer reads and writes: a *sql.DB, *sql.Conn or *sql.Tx.
type Execer interface {
	Querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}
