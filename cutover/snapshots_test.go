package cutover

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// snapshotOf opens a session with autocommit off that has taken an InnoDB snapshot (a read of
// the InnoDB table o, which it creates if need be), and returns it with its connection id.
func snapshotOf(t *testing.T, db *sql.DB) (*sql.Conn, int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id, n int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS o (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM o").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return conn, id
}

// The swap of an InnoDB table waits for a transaction that began before it until the
// transaction ends, but not for one open longer than the bound, which it names in a warning
// instead. The bound is 2 s here (10 s by default) to keep the test short.
func TestCutoverWaitsForYoungerTransactionsOnly(t *testing.T) {
	schema, db := setup(t)
	old, oldID := snapshotOf(t, db)
	defer old.Close()
	time.Sleep(3050 * time.Millisecond) // open 3 whole seconds by the server's clock: past the bound
	young, youngID := snapshotOf(t, db)
	defer young.Close()
	committed := make(chan time.Time, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		young.ExecContext(context.Background(), "COMMIT")
		committed <- time.Now()
	}()
	var logged sandboxtest.SyncBuffer
	cfg := fastConfig()
	cfg.SnapshotWait, cfg.Logger = 2*time.Second, slog.New(slog.NewTextHandler(&logged, nil))
	began := time.Now()
	if _, err := Run(context.Background(), db, swapOf(schema), caughtUp{}, cfg, nil); err != nil {
		t.Fatal(err)
	}
	swapped, at := time.Now(), <-committed
	t.Logf("the young transaction (connection %d) committed %s after the cut-over began, the swap was done %s after",
		youngID, at.Sub(began).Round(time.Millisecond), swapped.Sub(began).Round(time.Millisecond))
	if swapped.Before(at) {
		t.Errorf("swapped before the transaction that began before the cut-over ended")
	}
	if took := swapped.Sub(began); took > 1500*time.Millisecond {
		t.Errorf("the swap took %s: it waited for the transaction open longer than the bound", took)
	}
	if want := fmt.Sprintf("connection %d ", oldID); !strings.Contains(logged.String(), want) || !strings.Contains(logged.String(), "1412") {
		t.Errorf("no warning naming %s(open past the bound) and error 1412; the log:\n%s", want, logged.String())
	}
	if engine(db, "t") != "InnoDB" {
		t.Errorf("t was not swapped")
	}
}

// A look at the transaction list counts only when the list shows the look's own transaction: the
// server refills INNODB_TRX only after 100 ms in which nobody read it, so a client reading it
// every 20 ms keeps it as it was, without a transaction opened since.
func TestOlderTransactionsNeedsAFreshList(t *testing.T) {
	_, db := setup(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	reader := make(chan struct{})
	go func() {
		defer close(reader)
		for ctx.Err() == nil {
			db.ExecContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX")
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	opened, id := snapshotOf(t, db)
	defer opened.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stale := 0
	for i := 0; i < 5; i++ {
		older, fresh, err := transactions(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, o := range older {
			listed = listed || o.thread == id
		}
		if fresh && !listed {
			t.Fatalf("a look taken as fresh did not list the transaction of connection %d opened before it", id)
		}
		if !fresh {
			stale++
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-reader
	t.Logf("%d of 5 looks saw a stale list (and did not count)", stale)
}
