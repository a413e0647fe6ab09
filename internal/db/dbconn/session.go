package dbconn

import (
	"context"
	"database/sql"
	"errors"

	"github.com/go-sql-driver/mysql"
)

// Session kinds for the connections that move row data.
//
// Both use charset binary so bytes of any column charset travel unchanged (no conversion on read
// or write), UTC so TIMESTAMP values do not shift or collide at DST changes, and an sql_mode
// without strictness but with NO_AUTO_VALUE_ON_ZERO, so a stored 0 in an AUTO_INCREMENT column
// stays 0 and zero dates that MyISAM accepted are written back as they are.
const rowSQLMode = "'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'"

// OwnWriteVar is the user variable that marks enginemig's own writing sessions.
const OwnWriteVar = "@enginemig_own_write"

// OpenRowReader opens a pool whose queries use the binary protocol (server-side prepared
// statements), which returns FLOAT/DOUBLE exactly; the text protocol prints FLOAT with 6 digits.
func OpenRowReader(ctx context.Context, c Config, database string, maxConns int) (*sql.DB, error) {
	return openRowSession(ctx, c, database, maxConns, false)
}

// OpenRowWriter opens a pool that interpolates parameters client-side (one round trip per
// multi-row statement, no placeholder limit).
func OpenRowWriter(ctx context.Context, c Config, database string, maxConns int) (*sql.DB, error) {
	return openRowSession(ctx, c, database, maxConns, true)
}

func openRowSession(ctx context.Context, c Config, database string, maxConns int, interpolate bool) (*sql.DB, error) {
	dc, err := c.DriverConfig(database)
	if err != nil {
		return nil, err
	}
	dc.Collation = "binary"
	dc.InterpolateParams = interpolate
	dc.Params = map[string]string{
		"time_zone": "'+00:00'",
		"sql_mode":  rowSQLMode,
	}
	if interpolate {
		// Replay of a table without a key sends its one-row statements together (binlog.Applier);
		// values are interpolated, escaped by the driver.
		dc.MultiStatements = true
		// The writing sessions mark themselves so that the stand-ins of a table's triggers never
		// fire for enginemig's own writes (see table.Trigger.CreateGuarded).
		dc.Params[OwnWriteVar] = "1"
	}
	return openOwn(ctx, dc, c, maxConns)
}

// IsLockWait reports a lock wait timeout (error 1205): for a metadata lock (lock_wait_timeout)
// as for a row lock (innodb_lock_wait_timeout).
func IsLockWait(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

// IsDeadlock reports error 1213: the server chose this session's statement as a deadlock's victim
// and rolled it back.
func IsDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// IsNoSuchTrigger reports error 1360: the trigger does not exist.
func IsNoSuchTrigger(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1360
}

// IsLockConflict reports a lock wait timeout or a deadlock (error 1213): worth retrying.
func IsLockConflict(err error) bool {
	var me *mysql.MySQLError
	return IsLockWait(err) || errors.As(err, &me) && me.Number == 1213
}
