package state

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
)

// Lock takes a server-side advisory lock for the table on a connection held for the whole
// migration: a second enginemig on the same table is refused, and a lock that is free while the
// state says "in progress" proves the earlier process is gone (the server drops the lock of a
// dead connection).
func Lock(ctx context.Context, c dbconn.Config, schema, name string) (*sql.DB, error) {
	lockName := tableLockName(schema, name)
	// A pool of its own, closed at the end: closing the connection is what releases the lock,
	// also when this process is killed.
	conn, err := dbconn.Open(ctx, c, "", 1)
	if err != nil {
		return nil, err
	}
	// Waited for up to lockGrace: the server releases a closed connection's lock a moment after
	// the close, so an apply run again at once after one that failed (a script's retry) would
	// otherwise be refused by its own predecessor.
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lockName, lockGrace.Seconds()).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("take the migration lock: %w", err)
	}
	if got.Int64 != 1 {
		var holder sql.NullInt64
		conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName).Scan(&holder)
		conn.Close()
		return nil, outcome.New(outcome.Refused, fmt.Errorf("another enginemig is migrating %s (server connection %d)", dbconn.QualifiedName(schema, name), holder.Int64),
			"wait for it to finish, or stop it (`enginemig status` shows its progress)")
	}
	return conn, nil
}

// lockGrace is how long Lock waits for the table's lock held by another connection.
const lockGrace = 2 * time.Second

// tableLockName is the server-side advisory lock an apply holds on its table for its whole run.
func tableLockName(schema, name string) string {
	sum := sha1.Sum([]byte(schema + "\x00" + name))
	return "enginemig-" + hex.EncodeToString(sum[:])[:40]
}

// Interrupted reports whether a migration recorded as in progress has no enginemig behind it any
// more: nobody holds the table's advisory lock (the server released it when the process died).
func Interrupted(ctx context.Context, db *sql.DB, st State) bool {
	if !st.Stage.InProgress() || st.FinishedAt != nil {
		return false
	}
	var free sql.NullInt64
	err := db.QueryRowContext(ctx, "SELECT IS_FREE_LOCK(?)", tableLockName(st.Schema, st.Table)).Scan(&free)
	return err == nil && free.Int64 == 1
}
