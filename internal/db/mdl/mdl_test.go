package mdl_test

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/sandbox/sandboxtest"
)

// trxApp runs clients whose transactions (autocommit off) read a row of t, write o (InnoDB), then
// update the row of t and commit: each holds t's metadata lock from its first statement, where the
// server keeps it for the transaction, and asks for a stronger one at its UPDATE.
type trxApp struct {
	committed atomic.Int64
	mu        sync.Mutex
	errs      []string
}

func (a *trxApp) run(ctx context.Context, t *testing.T, db *sql.DB, rows, clients int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bg := context.Background()
			conn, err := db.Conn(bg)
			if err != nil {
				a.fail("connect: " + err.Error())
				return
			}
			defer conn.Close()
			conn.ExecContext(bg, "SET autocommit = 0")
			r := rand.New(rand.NewPCG(uint64(i), 39))
			for ctx.Err() == nil {
				id := 1 + i + clients*r.IntN(rows/clients) // rows of its own: MariaDB 11.8's snapshot isolation fails (1020) a transaction whose row another changed
				var v int
				err := conn.QueryRowContext(bg, "SELECT v FROM t WHERE id = ?", id).Scan(&v)
				if err == nil {
					_, err = conn.ExecContext(bg, "INSERT INTO o (tid) VALUES (?)", id)
				}
				if err == nil {
					time.Sleep(time.Duration(r.IntN(2)) * time.Millisecond) // the application's own work
					_, err = conn.ExecContext(bg, "UPDATE t SET v = v + 1 WHERE id = ?", id)
				}
				if err == nil {
					_, err = conn.ExecContext(bg, "COMMIT")
				}
				if err != nil {
					conn.ExecContext(bg, "ROLLBACK")
					a.fail(err.Error())
				} else {
					a.committed.Add(1)
				}
				time.Sleep(3 * time.Millisecond) // between requests
			}
		}()
	}
	return &wg
}

func (a *trxApp) fail(e string) {
	a.mu.Lock()
	a.errs = append(a.errs, e)
	a.mu.Unlock()
}

// locks takes LOCK TABLES t WRITE again and again for d through lock, holding it a moment each
// time, and counts the grants.
func locks(t *testing.T, db *sql.DB, d time.Duration, lock func(ctx context.Context, conn *sql.Conn, id int64) error) (granted, refused int) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if err := lock(ctx, conn, id); err != nil {
			refused++
			continue
		}
		granted++
		time.Sleep(2 * time.Millisecond)
		if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			t.Fatal(err)
		}
	}
	return granted, refused
}

// The application's transactions never fail while enginemig takes the table's lock through a
// Locker, on either engine. The same load and the same locks sent plainly (queued) show that the
// load meets the deadlock wherever the Locker avoids it (an InnoDB table), and that MariaDB lets a
// MyISAM table's metadata lock go after each statement (queued locks fail nothing there).
func TestLockNeverFailsAnOpenTransaction(t *testing.T) {
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		t.Skip("MySQL has no LOCK TABLES ... NOWAIT: the lock queues there as before (package comment; docs/runbook.md)")
	}
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	for _, engine := range []string{"MyISAM", "InnoDB"} {
		t.Run(engine, func(t *testing.T) {
			const rows = 200
			schema, db := sandboxtest.FreshDatabase(t, srv)
			db.SetMaxOpenConns(16)
			sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE="+engine,
				"INSERT INTO t SELECT seq, 0 FROM "+sandboxtest.Seq(rows),
				"CREATE TABLE o (id BIGINT AUTO_INCREMENT PRIMARY KEY, tid INT) ENGINE=InnoDB")
			l, err := mdl.New(context.Background(), db, schema, "t")
			if err != nil {
				t.Fatal(err)
			}
			run := func(name string, lock func(ctx context.Context, conn *sql.Conn, id int64) error) (errs []string, granted, refused int, committed int64) {
				var app trxApp
				ctx, stop := context.WithCancel(context.Background())
				wg := app.run(ctx, t, db, rows, 8)
				time.Sleep(100 * time.Millisecond)
				granted, refused = locks(t, db, 1500*time.Millisecond, lock)
				stop()
				wg.Wait()
				t.Logf("%s: %d locks granted, %d not within 300 ms; %d transactions committed, %d failed", name, granted, refused, app.committed.Load(), len(app.errs))
				return app.errs, granted, refused, app.committed.Load()
			}
			lockerErrs, granted, _, committed := run("through the Locker", func(ctx context.Context, conn *sql.Conn, id int64) error {
				return l.Lock(ctx, conn, "LOCK TABLES t WRITE", 300*time.Millisecond)
			})
			if granted == 0 || committed == 0 {
				t.Errorf("%d locks granted, %d transactions committed: the Locker must get its lock and let the application work", granted, committed)
			}
			queuedErrs, _, _, _ := run("queued", func(ctx context.Context, conn *sql.Conn, id int64) error {
				_, err := conn.ExecContext(ctx, "LOCK TABLES t WRITE")
				return err
			})
			keepsLock := engine == "InnoDB"
			switch {
			case keepsLock && len(queuedErrs) == 0:
				t.Errorf("the same locks queued failed no transaction: the load does not meet the deadlock, and the Locker's run proves nothing")
			case !keepsLock && len(queuedErrs) > 0:
				t.Errorf("queued locks on a %s table failed %d transactions (e.g. %s): the Locker would queue them here", engine, len(queuedErrs), queuedErrs[0])
			}
			if len(lockerErrs) > 0 {
				t.Errorf("%d of the application's transactions failed while the Locker took the lock, e.g. %s", len(lockerErrs), lockerErrs[0])
			}
		})
	}
}
