package dbconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// A write into a MyISAM table whose caller's deadline passes while it runs is not interrupted: it
// ends with every row written (an interrupted one keeps part, and replicas stop on it). Without
// ExecWhole (a plain ExecContext here) the deadline stops it on the server and the test fails.
// One stopped from outside (KILL QUERY, a statement time limit) is an InterruptedWriteError that
// needs attention.
func TestExecWholeNeverInterruptsAWrite(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	root, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sandboxtest.MustExec(t, root, "CREATE DATABASE d", "CREATE TABLE d.w (id INT PRIMARY KEY, v INT) ENGINE=MyISAM")
	db, err := Open(context.Background(), Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: SSLDisabled}, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const rows = 200 // 2 ms each: the statement runs for 0.4 s at least
	insert := "INSERT INTO d.w SELECT seq, SLEEP(0.002) FROM " + sandboxtest.Seq(rows)
	count := func() int {
		var n int
		if err := root.QueryRow("SELECT COUNT(*) FROM d.w").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("deadline", func(t *testing.T) {
		sandboxtest.MustExec(t, root, "DELETE FROM d.w")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := ExecWhole(ctx, db, "d.w", insert); err != nil {
			t.Fatalf("a write past its caller's deadline: %v", err)
		}
		if n := count(); n != rows {
			t.Fatalf("%d rows of %d: the write was cut off", n, rows)
		}
		if _, err := ExecWhole(ctx, db, "d.w", "DELETE FROM d.w"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a write after the deadline: %v, want the deadline (and nothing run)", err)
		}
		if n := count(); n != rows {
			t.Fatalf("the write after the deadline ran: %d rows", n)
		}
	})

	t.Run("killed", func(t *testing.T) {
		sandboxtest.MustExec(t, root, "DELETE FROM d.w")
		done := make(chan error, 1)
		go func() { _, err := ExecWhole(context.Background(), db, "d.w", insert); done <- err }()
		var id int64
		for end := time.Now().Add(5 * time.Second); id == 0 && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			root.QueryRow("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT INTO d.w%'").Scan(&id)
		}
		if id == 0 {
			t.Fatal("the write never showed in the process list")
		}
		time.Sleep(50 * time.Millisecond)
		sandboxtest.MustExec(t, root, KillQuery(id))
		err := <-done
		if !IsInterruptedWrite(err) || outcome.CodeOf(err) != outcome.NeedsAttention {
			t.Fatalf("a killed write returned %v (code %d); want an interrupted write that needs attention", err, outcome.CodeOf(err))
		}
		t.Logf("%d of %d rows kept: %v", count(), rows, err)
	})

	t.Run("statement limit", func(t *testing.T) {
		sandboxtest.MustExec(t, root, "DELETE FROM d.w")
		if srv.Flavour().MySQL() {
			t.Skip("MySQL's max_execution_time limits SELECT only; the host's limit on writes is MariaDB's max_statement_time")
		}
		_, err := ExecWhole(context.Background(), db, "d.w", "SET STATEMENT max_statement_time = 0.1 FOR "+insert)
		if !IsInterruptedWrite(err) {
			t.Fatalf("a write past a statement limit returned %v; want an interrupted write", err)
		}
	})
}
