// Package binlog streams a server's binary log with go-mysql's BinlogSyncer, turns row events of
// one table into typed changes, hands them out in batches (Replayer) and writes batches to a
// target table (Applier). Which changes are written when is package shadow's decision
// (shadow/order.go): nothing here calls back into it.
package binlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Position is a binlog file and offset; offsets are the end of an event, as SHOW MASTER STATUS
// and event headers report them.
type Position = mysql.Position

// ErrBinlogOff means the server writes no binary log, so changes cannot be captured.
var ErrBinlogOff = errors.New("binary logging is off (log_bin=OFF)")

// Querier runs a query: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier = dbconn.Querier

// binaryLogStatus is set once a server has refused SHOW MASTER STATUS and answered SHOW BINARY
// LOG STATUS (MySQL 8.4 and later): later calls ask that way first, so a hot path (every
// verification chunk, the cut-over under its lock) does not pay a failing statement each time.
var binaryLogStatus atomic.Bool

// CurrentPosition reads where the server is writing its binlog now: SHOW MASTER STATUS (MariaDB,
// MySQL before 8.4) or SHOW BINARY LOG STATUS (MySQL 8.2+, the only form since 8.4).
func CurrentPosition(ctx context.Context, db Querier) (Position, error) {
	first, second := "SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"
	if binaryLogStatus.Load() {
		first, second = second, first
	}
	rows, err := db.QueryContext(ctx, first)
	if err != nil {
		var err2 error
		if rows, err2 = db.QueryContext(ctx, second); err2 != nil {
			return Position{}, fmt.Errorf("read binlog position (needs BINLOG MONITOR or REPLICATION CLIENT): %w", err)
		}
		binaryLogStatus.Store(second == "SHOW BINARY LOG STATUS")
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Position{}, err
		}
		return Position{}, ErrBinlogOff
	}
	// Copies, not sql.RawBytes: database/sql keeps a row scanned into RawBytes locked until the
	// next Next, and Rows.Err would then wait for good behind the close an ended ctx starts.
	vals := make([][]byte, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return Position{}, err
	}
	var p Position
	p.Name = string(vals[0])
	if _, err := fmt.Sscan(string(vals[1]), &p.Pos); err != nil {
		return Position{}, fmt.Errorf("binlog position %q: %w", vals[1], err)
	}
	return p, rows.Err()
}

// Flavor guesses the replication flavor from VERSION(): "mariadb" or "mysql".
func Flavor(version string) string {
	if dbconn.MariaDB(version) {
		return mysql.MariaDBFlavor
	}
	return mysql.MySQLFlavor
}

// Available lists the binlog files the server still has, oldest first.
func Available(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("list binlogs: %w", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var files []string
	for rows.Next() {
		vals := make([][]byte, len(cols)) // copies: see CurrentPosition
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		files = append(files, string(vals[0]))
	}
	return files, rows.Err()
}

// StillAvailable reports whether replay from p is possible: its file must still exist.
func StillAvailable(ctx context.Context, db *sql.DB, p Position) (bool, error) {
	files, err := Available(ctx, db)
	if err != nil {
		return false, err
	}
	for _, f := range files {
		if f == p.Name {
			return true, nil
		}
	}
	return false, nil
}
