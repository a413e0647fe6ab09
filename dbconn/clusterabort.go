package dbconn

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ClusterAbortRetries is how often RetryClusterAborts runs a unit of work that keeps being
// aborted before it gives up and returns the error.
const ClusterAbortRetries = 5

// IsClusterAbort reports a transaction the server rolled back so that another could go on:
// error 1213, which InnoDB returns for a deadlock and Galera for a brute-force abort (a replicated
// write set or a DDL in total-order isolation needed the transaction's locks) and for a failed
// certification. Nothing of the transaction stays; the same transaction can run again.
func IsClusterAbort(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// RetryClusterAborts runs unit, and runs it again while it fails with IsClusterAbort, up to
// ClusterAbortRetries times with a short growing pause. unit must be one whole transaction (or
// one autocommit statement) that does all its work again when rerun (a replay batch, a copy
// chunk): error 1213 means the server rolled all of it back, so the rerun is its only effect and
// no change is lost or doubled. This is the one place enginemig retries work the cluster aborted.
func RetryClusterAborts(ctx context.Context, unit func() error) error {
	pause := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := unit()
		if err == nil || !IsClusterAbort(err) || attempt >= ClusterAbortRetries || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause *= 2
	}
}

// GaleraNode reports whether the server is a node of a Galera cluster (wsrep_on=ON). MySQL has
// no such variable: an error means no.
func GaleraNode(ctx context.Context, db *sql.DB) bool {
	var on sql.NullInt64
	return db.QueryRowContext(ctx, "SELECT @@GLOBAL.wsrep_on").Scan(&on) == nil && on.Int64 == 1
}
