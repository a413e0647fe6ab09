package dbconn

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

// The rule for writes into a non-transactional table (docs/how-it-works/capture.md, "Writes into
// MyISAM are never interrupted"): enginemig never interrupts a statement of its own that may write
// one, and bounds each such statement by its size (rows per statement) before it starts instead.
//
// A MyISAM or Aria statement stopped half-way keeps what it did, and the server binlogs it with
// the interruption's error code. Under binlog_format STATEMENT or MIXED every replica then refuses
// to apply it ("Query partially completed on the master") and its SQL thread stops until a DBA
// skips the event, leaving the replica without the part the primary kept. Cancelling the
// statement's context does exactly that here: the driver closes the connection, and dbconn's own
// connection stops the statement on the server (KILL QUERY, own.go). So these statements run
// under a context that cannot end; a deadline or a cancellation is looked at before each one,
// never during it. Every write into the capture's target (the kept MyISAM original in a rollback),
// into trigger capture's MyISAM change log and into the copy's temporary MyISAM stage goes
// through ExecWhole.

// ExecWhole runs query, which may write the non-transactional table named table, to its end
// whatever becomes of ctx, after checking that ctx has not ended. An interruption from outside
// (a KILL, a statement time limit, a shutdown) is returned as an *InterruptedWriteError.
func ExecWhole(ctx context.Context, q Execer, table, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := q.ExecContext(context.WithoutCancel(ctx), query, args...)
	if IsInterruption(err) {
		return res, outcome.New(outcome.NeedsAttention, &InterruptedWriteError{Table: table, Err: err}, InterruptedWriteRemedy)
	}
	return res, err
}

// IsInterruption reports errors by which the server says it stopped a statement before its end:
// killed (1317, 1927), past a statement time limit (MariaDB 1969, MySQL 3024), or shut down (1053).
func IsInterruption(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1053, 1317, 1927, 1969, 3024:
		return true
	}
	return false
}

// InterruptedWriteError is a write of enginemig's into a non-transactional table that something
// outside enginemig interrupted: the table may keep part of it, and replicas under STATEMENT or
// MIXED binlog format stop on it.
type InterruptedWriteError struct {
	Table string // qualified
	Err   error
}

func (e *InterruptedWriteError) Error() string {
	return fmt.Sprintf("a write of enginemig's into the non-transactional table %s was interrupted from outside enginemig "+
		"(a KILL, a statement time limit such as max_statement_time, or a shutdown): %v; the table may keep part of that "+
		"statement, and the run stopped", e.Table, e.Err)
}

func (e *InterruptedWriteError) Unwrap() error { return e.Err }

// IsInterruptedWrite reports an InterruptedWriteError in err's chain: never retried as if it had
// not happened, nor taken for a lost connection to resume from.
func IsInterruptedWrite(err error) bool {
	iw := (*InterruptedWriteError)(nil)
	return errors.As(err, &iw)
}

// InterruptedWriteRemedy is what to do after an InterruptedWriteError.
const InterruptedWriteRemedy = "on this server nothing is lost: running the same command again writes those rows again. " +
	"Under binlog_format STATEMENT or MIXED every replica stops at that statement ('Query partially completed on the master'): " +
	"on each, skip that one event (MariaDB: STOP SLAVE; SET GLOBAL sql_slave_skip_counter = 1; START SLAVE), run the same " +
	"command again, and compare the table on the replicas (pt-table-checksum). Keep whatever interrupted it (a statement " +
	"time limit on the account, a KILL by a person or a watchdog) away from enginemig's sessions"
