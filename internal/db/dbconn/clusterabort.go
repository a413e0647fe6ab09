package dbconn

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ClusterAbortPatience is how long RetryClusterAborts keeps running a unit of work the cluster
// keeps aborting before it gives up and returns the error. A run of DDL in total-order isolation
// on the table aborts every transaction on it that overlaps one of them; the unit commits in a gap
// between two.
const ClusterAbortPatience = 10 * time.Second

// clusterAbortMaxPause caps the pause between two runs.
const clusterAbortMaxPause = 200 * time.Millisecond

// IsClusterAbort reports a transaction the server rolled back so that another could go on:
// error 1213, which InnoDB returns for a deadlock and Galera for a brute-force abort (a replicated
// write set or a DDL in total-order isolation needed the transaction's locks) and for a failed
// certification. Nothing of the transaction stays; the same transaction can run again.
func IsClusterAbort(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// RetryClusterAborts runs unit, and runs it again while it fails with IsClusterAbort, for up to
// ClusterAbortPatience, with a pause that grows from 5 ms to clusterAbortMaxPause. unit must be one
// whole transaction (or one autocommit statement) that does all its work again when rerun (a
// replay batch, a copy chunk, a sync's write): error 1213 means the server rolled all of it back,
// so the rerun is its only effect and no change is lost or doubled. This is the one place
// enginemig retries work the cluster aborted.
func RetryClusterAborts(ctx context.Context, unit func() error) error {
	pause := 5 * time.Millisecond
	deadline := time.Now().Add(ClusterAbortPatience)
	for {
		err := unit()
		if err == nil || !IsClusterAbort(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(pause*2, clusterAbortMaxPause)
	}
}

// GaleraNode reports whether the server is a node of a Galera cluster (wsrep_on=ON). MySQL has
// no such variable: an error means no.
func GaleraNode(ctx context.Context, db *sql.DB) bool {
	var on sql.NullInt64
	return db.QueryRowContext(ctx, "SELECT @@GLOBAL.wsrep_on").Scan(&on) == nil && on.Int64 == 1
}
