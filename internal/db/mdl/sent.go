package mdl

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// sent counts, per server, the LOCK TABLES statements this process sent there (tried ones
// included: the server counts every statement it receives). Every LOCK TABLES of enginemig's goes
// through a Locker, so this is the whole of this process's share of the server's
// Com_lock_tables, which plan subtracts before it reports the application's (apply --plan checks
// the server again before each table, after converting the ones before it).
var sent sync.Map // server key -> *atomic.Int64

// serverKeySQL names a server the same way for every pool that reaches it.
const serverKeySQL = "CONCAT(@@hostname, ':', @@port)"

// LockTablesSent is how many LOCK TABLES statements this process has sent to db's server.
func LockTablesSent(ctx context.Context, db dbconn.Querier) (int64, error) {
	var key string
	if err := db.QueryRowContext(ctx, "SELECT "+serverKeySQL).Scan(&key); err != nil {
		return 0, err
	}
	if n, ok := sent.Load(key); ok {
		return n.(*atomic.Int64).Load(), nil
	}
	return 0, nil
}

// send executes stmt on conn, counting it when it is a LOCK TABLES.
func (l *Locker) send(ctx context.Context, conn *sql.Conn, stmt string) error {
	if strings.HasPrefix(stmt, "LOCK TABLES ") {
		n, _ := sent.LoadOrStore(l.server, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	_, err := conn.ExecContext(ctx, stmt)
	return err
}
