// Package trxapp is an application whose transactions hold a table's metadata lock across
// statements and then wait for something else, the shapes that close a deadlock cycle with a
// lock queued on the table (package mdl). For tests only.
//
// Its clients, with autocommit off, work on rows of their own of t (id, v) and note every update
// of t as a row of o (tid) in the same transaction, so that at the end SUM(t.v) = COUNT(o) = the
// updates of the committed transactions (Updates). A third of them read a row of t, note it and
// then update it (on InnoDB the UPDATE asks for a stronger lock on t than the read holds); a third
// update a row of t and then take a named lock (GET_LOCK, a metadata lock too) before updating
// another; a third take the name first. Between transactions a client pauses 3 ms.
package trxapp

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Schema creates t with rows rows and o, t in engine.
func Schema(engine, seq string) []string {
	return []string{"CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, pad CHAR(100)) ENGINE=" + engine,
		"INSERT INTO t SELECT seq, 0, HEX(seq) FROM " + seq,
		"CREATE TABLE o (id BIGINT AUTO_INCREMENT PRIMARY KEY, tid INT, at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB"}
}

// App counts what its clients committed and keeps every error.
type App struct {
	Committed atomic.Int64 // transactions
	Updates   atomic.Int64 // updates of t in them
	mu        sync.Mutex
	errs      []string
	paused    atomic.Bool
}

// Pause holds every client before its next transaction until Resume: a pause the whole
// application takes at once, the gap a lock that never queues behind a transaction waits for.
func (a *App) Pause() { a.paused.Store(true) }

// Resume lets the clients go on after Pause.
func (a *App) Resume() { a.paused.Store(false) }

// Errors are the statements that failed, with the time they did.
func (a *App) Errors() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.errs...)
}

// Run starts clients on db (t of rows rows) until ctx ends; wait on the group.
func (a *App) Run(ctx context.Context, db *sql.DB, rows, clients int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.client(ctx, db, i, rows, clients)
		}()
	}
	return &wg
}

func (a *App) client(ctx context.Context, db *sql.DB, i, rows, clients int) {
	bg := context.Background()
	conn, err := db.Conn(bg)
	if err != nil {
		a.fail("connect", err)
		return
	}
	defer conn.Close()
	conn.ExecContext(bg, "SET autocommit = 0")
	r := rand.New(rand.NewPCG(uint64(i), 39))
	// Rows of its own: MariaDB 11.8's snapshot isolation fails (1020) a transaction whose row
	// another changed, the application's own conflict.
	own := func() int { return 1 + i + clients*r.IntN(rows/clients) }
	for ctx.Err() == nil {
		if a.paused.Load() {
			time.Sleep(time.Millisecond)
			continue
		}
		c := &txn{conn: conn, ctx: bg}
		switch i % 3 {
		case 0:
			id := own()
			c.read(id)
			time.Sleep(time.Duration(r.IntN(2)) * time.Millisecond) // the application's own work
			c.update(id)
		case 1:
			c.update(own())
			c.named()
			c.update(own())
		default:
			c.named()
			c.update(own())
			c.update(own())
		}
		if c.err == nil {
			c.step, c.err = "COMMIT", c.exec("COMMIT")
		}
		if c.err != nil {
			conn.ExecContext(bg, "ROLLBACK")
			a.fail(c.step, c.err)
		} else {
			a.Committed.Add(1)
			a.Updates.Add(int64(c.updates))
		}
		conn.ExecContext(bg, "DO RELEASE_ALL_LOCKS()")
		time.Sleep(3 * time.Millisecond)
	}
}

// txn runs one transaction's statements until one fails.
type txn struct {
	conn    *sql.Conn
	ctx     context.Context
	step    string
	err     error
	updates int
}

func (c *txn) exec(q string, args ...any) error {
	_, err := c.conn.ExecContext(c.ctx, q, args...)
	return err
}

func (c *txn) read(id int) {
	if c.err == nil {
		var v int
		c.step, c.err = "SELECT t", c.conn.QueryRowContext(c.ctx, "SELECT v FROM t WHERE id = ?", id).Scan(&v)
	}
}

func (c *txn) update(id int) {
	if c.err == nil {
		c.step, c.err = "INSERT o", c.exec("INSERT INTO o (tid) VALUES (?)", id)
	}
	if c.err == nil {
		c.step, c.err = "UPDATE t", c.exec("UPDATE t SET v = v + 1 WHERE id = ?", id)
		c.updates++
	}
}

func (c *txn) named() {
	if c.err == nil {
		var got sql.NullInt64
		// The name is a metadata lock: a cycle through it fails at once (1213). The wait's
		// bound only says how long a third of the clients may queue for one name, each holder
		// slowed by the machine: with 5 s, a CI run whose other test binaries loaded both cores
		// timed one out while a rollback held t for its catch-up, with no cycle.
		c.step, c.err = "GET_LOCK", c.conn.QueryRowContext(c.ctx, "SELECT GET_LOCK('enginemig_trxapp', 30)").Scan(&got)
		if c.err == nil && got.Int64 != 1 {
			c.err = fmt.Errorf("GET_LOCK returned %v", got)
		}
	}
}

func (a *App) fail(step string, err error) {
	a.mu.Lock()
	a.errs = append(a.errs, time.Now().Format("15:04:05.000")+" "+step+": "+err.Error())
	a.mu.Unlock()
}
