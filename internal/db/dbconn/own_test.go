package dbconn

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// A statement whose caller stopped waiting for it is stopped on the server too: the driver only
// closes the connection, and a statement waiting for a MyISAM table's lock goes on waiting (and
// then runs) on the server, holding its metadata locks all along. Here a write queues behind
// another session's long read; both kinds of call (Exec and Query) are checked: the abandoned
// write leaves the process list while the read still runs.
func TestAbandonedStatementsStopOnTheServer(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	root, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sandboxtest.MustExec(t, root, "CREATE DATABASE d")
	sandboxtest.MustExec(t, root, "CREATE TABLE d.t (id INT PRIMARY KEY) ENGINE=MyISAM")
	sandboxtest.MustExec(t, root, "INSERT INTO d.t VALUES (1), (2)")
	db, err := Open(context.Background(), Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: SSLDisabled}, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"exec", func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "UPDATE d.t SET id = id + 0")
			return err
		}},
		{"query", func(ctx context.Context) error {
			rows, err := db.QueryContext(ctx, "UPDATE d.t SET id = id + 0")
			if err == nil {
				rows.Close()
			}
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const hold = 2 * time.Second // per row: the read holds the table for 4 s
			read := make(chan error, 1)
			go func() {
				_, err := root.Exec("SELECT SLEEP(?) FROM d.t", hold.Seconds())
				read <- err
			}()
			defer func() {
				if err := <-read; err != nil {
					t.Error(err)
				}
			}()
			waitFor(t, root, "SELECT SLEEP%", 1)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := c.call(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Fatalf("the write queued behind the read returned %v; want its deadline", err)
			}
			if left := waitFor(t, root, "UPDATE d.t%", 0); left > 0 {
				t.Fatalf("the abandoned write still waits on the server while the read runs (%d)", left)
			}
		})
	}
}

// waitFor polls the process list for up to two seconds until want statements match pattern, and
// returns how many did last.
func waitFor(t *testing.T, root *sql.DB, pattern string, want int) int {
	t.Helper()
	var n int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()", pattern).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == want || time.Now().After(deadline) {
			return n
		}
	}
}

// Prepared statements of an own connection (the row reader's: no client-side interpolation) are
// counted, and still take a BIGINT UNSIGNED key above 1<<63.
func TestPreparedStatementsAreCountedAndTakeEveryKey(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	c := Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: SSLDisabled}
	db, err := OpenRowReader(context.Background(), c, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := c.OwnUse().Statements
	key := uint64(1<<63 + 5)
	var got uint64
	if err := db.QueryRow("SELECT CAST(? AS UNSIGNED)", key).Scan(&got); err != nil || got != key {
		t.Fatalf("a prepared read of key %d: %d, %v", key, got, err)
	}
	// The prepare and the execution are each a statement the server counts.
	if n := c.OwnUse().Statements - before; n < 2 {
		t.Fatalf("%d statements counted for a prepared read", n)
	}
}
