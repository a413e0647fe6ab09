package cutover

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Another session holds a lock on the table being swapped in (InnoDB's purge does, for moments,
// on a shadow that took many writes) when the rename is queued. The rename takes its metadata
// locks in name order, `_t_new` before `t`, so it waits there first; unlocking `t` then would let
// the application's queued writes into the old table before the rename. Every row the old table
// holds must have been there when the table was locked.
func TestSwapWaitsUntilTheRenameQueuesOnTheTable(t *testing.T) {
	schema, db, stop := insertingInto(t, 8)
	holder, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	cfg := fastConfig()
	target := &countUnderLock{schema: schema, before: func() {
		// Under the cut-over's lock: hold _t_new for a while, as purge would.
		if _, err := holder.ExecContext(context.Background(), "LOCK TABLES _t_new READ"); err != nil {
			t.Error(err)
		}
		go func() {
			time.Sleep(300 * time.Millisecond)
			holder.ExecContext(context.Background(), "UNLOCK TABLES")
		}()
	}}
	_, err = Run(context.Background(), db, swapOf(schema), target, cfg, nil)
	time.Sleep(50 * time.Millisecond)
	stop()
	if err != nil {
		t.Fatalf("swap: %v", err)
	}
	var n int64
	db.QueryRow("SELECT COUNT(*) FROM _t_old").Scan(&n)
	if n != target.n {
		t.Fatalf("the old table has %d rows, %d when it was locked: %d writes went to it after the lock", n, target.n, n-target.n)
	}
}

// countUnderLock counts t's rows in the locked session (what the old table must still hold after
// the swap), after running before.
type countUnderLock struct {
	schema string
	before func()
	n      int64
}

func (c *countUnderLock) Hold()    {}
func (c *countUnderLock) Release() {}

func (c *countUnderLock) WaitFor(ctx context.Context, conn *sql.Conn) (string, error) {
	if c.before != nil {
		c.before()
		c.before = nil
	}
	err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+c.schema+"`.t").Scan(&c.n)
	return "", err
}

// insertingInto creates a MyISAM t and an InnoDB _t_new in a fresh database and starts writers
// inserting into t (at: when the statement started, in ns), for 100 ms before it returns. stop
// ends them and waits.
func insertingInto(t *testing.T, writers int) (schema string, db *sql.DB, stop func()) {
	schema, db = sandboxtest.FreshDatabase(t, srv)
	db.SetMaxOpenConns(30)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, at BIGINT NOT NULL) ENGINE=MyISAM",
		"CREATE TABLE _t_new (id INT PRIMARY KEY, at BIGINT NOT NULL) ENGINE=InnoDB")
	ctx, cancel := context.WithCancel(context.Background())
	var next atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				db.Exec("INSERT INTO t VALUES (?, ?)", next.Add(1), time.Now().UnixNano())
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	return schema, db, func() { cancel(); wg.Wait() }
}
