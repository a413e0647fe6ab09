package binlog

import (
	"context"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// A barrier lets every change up to its position through, holds the table's later changes until
// it is lifted, and lets events of other tables before them go on moving the position; once
// lifted, the held changes are applied. Verification relies on it to compare a target that
// stands still while the application writes the source again (shadow/verify, compareMarked).
func TestBarrierHoldsTheTablesLaterChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, r := testReplayer(ctx, t, "CREATE TABLE u (id INT PRIMARY KEY) ENGINE=MyISAM")
	applied := make(chan int, 100) // the changes of each batch written
	go func() {
		for {
			b, err := r.Next(ctx)
			if err != nil {
				close(applied)
				return
			}
			if len(b.Changes) > 0 {
				applied <- len(b.Changes)
			}
			r.Done(b, len(b.Changes))
		}
	}()
	count := func(within time.Duration) (n int) {
		deadline := time.After(within)
		for {
			select {
			case k := <-applied:
				n += k
			case <-deadline:
				return n
			}
		}
	}
	position := func() Position {
		p, err := CurrentPosition(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	sandboxtest.MustExec(t, db, "INSERT INTO t VALUES (1, 0), (2, 0)", "UPDATE t SET v = 1 WHERE id = 1")
	mark := position()
	lift := r.Barrier(mark)
	if err := r.WaitFor(ctx, mark); err != nil {
		t.Fatalf("the changes up to the barrier were not applied: %v", err)
	}
	if n := count(200 * time.Millisecond); n != 3 {
		t.Fatalf("%d changes applied up to the barrier, want 3", n)
	}
	sandboxtest.MustExec(t, db, "INSERT INTO u VALUES (1)")
	other := position()
	sandboxtest.MustExec(t, db, "INSERT INTO t VALUES (3, 0)", "UPDATE t SET v = 2 WHERE id = 2")
	if err := r.WaitFor(ctx, other); err != nil {
		t.Fatalf("another table's event before the held ones did not move the position: %v", err)
	}
	if n := count(500 * time.Millisecond); n != 0 {
		t.Fatalf("%d of the table's changes past the barrier were applied while it stood", n)
	}
	lift()
	lift() // idempotent
	if err := r.WaitFor(ctx, position()); err != nil {
		t.Fatalf("the held changes were not applied once the barrier was lifted: %v", err)
	}
	if n := count(200 * time.Millisecond); n != 2 {
		t.Fatalf("%d changes applied after the barrier was lifted, want 2", n)
	}
}
