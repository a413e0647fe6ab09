package binlog

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// While nobody waits for replay, a batch keeps collecting across gaps in the stream (fewer,
// larger transactions on the server the application needs); a WaitFor call ends it at once. The
// patience is set to an hour here, so a WaitFor that did not cut the batch short would not return
// before the test's deadline, and writes 5 ms apart would each be a batch of their own if the
// batch ended at the first idle gap: no batch may come before WaitFor, and the one WaitFor ends
// holds more than one insert. The stream may deliver the last inserts after WaitFor cut the batch
// (it was 1 ms behind on a loaded machine: batches [9 1]); they come in one more batch.
func TestPatientBatchEndsWhenSomeoneWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, r := testReplayer(ctx, t)
	r.patience = time.Hour

	batches := make(chan int, 100)
	go func() {
		for {
			b, err := r.Next(ctx)
			if err != nil {
				close(batches)
				return
			}
			if len(b.Changes) > 0 {
				batches <- len(b.Changes)
			}
			r.Done(b, len(b.Changes))
		}
	}()
	// receive takes batches until they hold n changes; a batch that never comes fails the test.
	receive := func(n int) (sizes []int) {
		for got := 0; got < n; {
			select {
			case size, ok := <-batches:
				if !ok {
					t.Fatalf("replay stopped after batches %v", sizes)
				}
				sizes = append(sizes, size)
				got += size
			case <-time.After(10 * time.Second):
				t.Fatalf("batches %v: fewer than %d changes (a patient batch nobody ended?)", sizes, n)
			}
		}
		return sizes
	}
	const rows = 10
	for i := range rows {
		sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, 0)", i))
		time.Sleep(5 * time.Millisecond)
	}
	end, err := CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// Forty times the gaps between the inserts: a batch that ended at an idle gap has come by now.
	time.Sleep(200 * time.Millisecond)
	if early := len(batches); early > 0 {
		t.Fatalf("%d batch(es) ended before anyone waited for replay (patience of an hour)", early)
	}
	if err := r.WaitFor(ctx, end); err != nil {
		t.Fatalf("WaitFor did not end the patient batch: %v", err)
	}
	sizes := receive(rows)
	if len(sizes) > 2 || sizes[0] < 2 {
		t.Fatalf("%d inserts 5 ms apart came in batches %v; want one patient batch (and at most a tail the stream delivered after it)", rows, sizes)
	}
}

// testReplayer starts a server of the test flavour with table t (MyISAM) in a fresh database, and
// a replayer of t's changes from now on; the stream closes with the test. More DDL may come first.
func testReplayer(ctx context.Context, t *testing.T, ddl ...string) (*sql.DB, *Replayer) {
	t.Helper()
	f, err := sandboxtest.Flavour()
	if err != nil {
		t.Fatal(err)
	}
	s := sandboxtest.ForFlavour(t, f, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, s)
	var version string
	if err := db.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, db, append([]string{"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM"}, ddl...)...)
	start, err := CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return db, NewReplayer(openTestStream(ctx, t, s, db, schema, version, start))
}

// openTestStream streams table t of schema from start, as a replica of s running version; the
// stream closes with the test.
func openTestStream(ctx context.Context, t *testing.T, s *sandbox.Server, db *sql.DB, schema, version string, start Position) *Stream {
	t.Helper()
	info, err := table.Load(ctx, db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	conn := dbconn.Config{Host: "127.0.0.1", Port: s.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	st, err := OpenStream(ctx, StreamConfig{Conn: conn, Flavor: Flavor(version), ServerID: 4242, Table: info}, start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
