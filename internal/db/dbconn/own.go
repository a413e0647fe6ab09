package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Own connections: every connection this process opens through OpenDriverConfig records its
// server connection id here while it is open, per server address, so that a lock-wait report can
// tell enginemig's own sessions from the application's (the process list has no other mark a
// MariaDB client can set). Closed connections leave the registry, because connection ids start
// again from 1 after a server restart and could then name an application's session.
var own = struct {
	sync.Mutex
	ids map[string]map[int64]bool
	use map[string]*usage
}{ids: map[string]map[int64]bool{}, use: map[string]*usage{}}

// usage counts what this process asks of one server, against the limits a host sets per account
// (MAX_USER_CONNECTIONS, MAX_CONNECTIONS_PER_HOUR, MAX_QUERIES_PER_HOUR): a test holds apply to
// the connection count plan budgets for it, and a run reports what it used.
type usage struct {
	open, peak, connects int64 // under own's lock
	statements           atomic.Int64
}

// Use is what this process has asked of one server so far.
type Use struct {
	Open       int64 // connections open now
	Peak       int64 // the most open at once
	Connects   int64 // connections opened
	Statements int64 // statements sent on them
}

// OwnUse returns what this process has asked of the server c connects to, through its own pools
// (the binlog stream's replication session is not among them).
func (c Config) OwnUse() Use {
	own.Lock()
	defer own.Unlock()
	u := own.use[c.useKey()]
	if u == nil {
		return Use{}
	}
	return Use{Open: u.open, Peak: u.peak, Connects: u.connects, Statements: u.statements.Load()}
}

// OwnPeers returns the ids of this process's connections open on the server that connection id
// (one of them) is on: the account's connections that are enginemig's own, not the application's.
func OwnPeers(id int64) map[int64]bool {
	own.Lock()
	defer own.Unlock()
	peers := map[int64]bool{}
	for _, ids := range own.ids {
		if ids[id] {
			for i := range ids {
				peers[i] = true
			}
		}
	}
	return peers
}

// IsOwn returns a function that reports whether a connection id on the server c connects to is
// currently open in this process.
func (c Config) IsOwn() func(id int64) bool {
	key := c.ownKey()
	return func(id int64) bool {
		own.Lock()
		defer own.Unlock()
		return own.ids[key][id]
	}
}

// useKey keys usage by account as well as server: the hosts' limits are the account's.
func (c Config) useKey() string { return c.ownKey() + "|" + c.User }

func (c Config) ownKey() string {
	if c.useSocket() {
		return "unix:" + c.Socket
	}
	return "tcp:" + c.Address()
}

// ownConnector registers each new connection's id under key.
type ownConnector struct {
	driver.Connector
	key, useKey string
}

func (c ownConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	id, version, ok := connectionID(ctx, conn)
	liftLimits(ctx, conn, version)
	if !ok {
		return conn, nil // not registered: its waits go unreported, nothing else changes
	}
	own.Lock()
	if own.ids[c.key] == nil {
		own.ids[c.key] = map[int64]bool{}
	}
	own.ids[c.key][id] = true
	u := own.use[c.useKey]
	if u == nil {
		u = &usage{}
		own.use[c.useKey] = u
	}
	u.open++
	u.connects++
	u.statements.Add(1 + int64(len(freeSession(version)))) // connectionID's and liftLimits'
	u.peak = max(u.peak, u.open)
	own.Unlock()
	return &ownConn{Conn: conn, key: c.key, id: id, use: u, killer: c.Connector}, nil
}

// connectionID reads the new connection's server id and the server's version.
func connectionID(ctx context.Context, conn driver.Conn) (int64, string, bool) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return 0, "", false
	}
	rows, err := q.QueryContext(ctx, "SELECT CONNECTION_ID(), VERSION()", nil)
	if err != nil {
		return 0, "", false
	}
	defer rows.Close()
	vals := make([]driver.Value, 2)
	if rows.Next(vals) != nil {
		return 0, "", false
	}
	version := ""
	switch v := vals[1].(type) {
	case []byte:
		version = string(v)
	case string:
		version = v
	}
	switch v := vals[0].(type) {
	case int64:
		return v, version, true
	case uint64: // MySQL's CONNECTION_ID() is BIGINT UNSIGNED (MariaDB's is signed)
		return int64(v), version, true
	case []byte:
		id, err := strconv.ParseInt(string(v), 10, 64)
		return id, version, err == nil
	}
	return 0, version, false
}

// ownConn is the driver's connection with a Close that leaves the registry, and statements its
// caller gave up on stopped on the server (abandoned). It forwards every optional interface
// database/sql looks for, so the pool behaves as with the bare connection.
type ownConn struct {
	driver.Conn
	key    string
	id     int64
	use    *usage
	killer driver.Connector // the bare connector: a session that is not itself registered
}

// killWait bounds the session that stops an abandoned statement.
const killWait = 5 * time.Second

// abandoned stops on the server the statement whose caller stopped waiting for it (ctx ended): the
// driver then closes the connection, but the server goes on with the statement until it ends or
// next writes to the closed socket, holding what it locked. A copy chunk's read queued behind an
// application write that waited for disk space kept the shadow's metadata lock, and the DROP that
// would have given the space back waited for it (docs/how-it-works/pace.md, "A full disk"). Only a
// connection the driver closed is killed: it is never used again, so no later statement of its can
// be the one stopped.
func (c *ownConn) abandoned(ctx context.Context, err error) {
	if err == nil || ctx.Err() == nil || c.IsValid() {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killWait)
	defer cancel()
	conn, err := c.killer.Connect(kctx)
	if err != nil {
		return
	}
	defer conn.Close()
	if e, ok := conn.(driver.ExecerContext); ok {
		e.ExecContext(kctx, KillQuery(c.id), nil) // gone already: nothing to stop
	}
}

// KillQuery ends the statement connection id runs, keeping its session.
func KillQuery(id int64) string { return fmt.Sprintf("KILL QUERY %d", id) }

func (c *ownConn) Close() error {
	own.Lock()
	delete(own.ids[c.key], c.id)
	c.use.open--
	own.Unlock()
	return c.Conn.Close()
}

func (c *ownConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return c.Conn.Begin() //lint:ignore SA1019 only for a driver without BeginTx
}

func (c *ownConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.use.statements.Add(1)
	var st driver.Stmt
	var err error
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.Conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &ownStmt{Stmt: st, use: c.use, conn: c.Conn}, nil
}

func (c *ownConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := c.Conn.(driver.ExecerContext); ok {
		c.use.statements.Add(1)
		res, err := e.ExecContext(ctx, query, args)
		c.abandoned(ctx, err)
		return res, err
	}
	return nil, driver.ErrSkip
}

func (c *ownConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := c.Conn.(driver.QueryerContext); ok {
		c.use.statements.Add(1)
		rows, err := q.QueryContext(ctx, query, args)
		c.abandoned(ctx, err)
		return rows, err
	}
	return nil, driver.ErrSkip
}

func (c *ownConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *ownConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *ownConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *ownConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// OpenApplication opens a pool whose connections are not counted as this process's own: for a
// simulated application (the demo's load), whose lock waits are the application's, not apply's.
func OpenApplication(ctx context.Context, c Config, database string, maxConns int) (*sql.DB, error) {
	dc, err := c.DriverConfig(database)
	if err != nil {
		return nil, err
	}
	return OpenDriverConfig(ctx, dc, c.Address(), maxConns)
}
