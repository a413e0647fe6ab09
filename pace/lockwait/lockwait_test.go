package lockwait

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

var srv *sandbox.Server

// One server with both lock tables available (neither is on by default in MariaDB), so each
// source can be asked directly; FindHolders takes the first.
func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{ExtraArgs: []string{"--plugin-load-add=metadata_lock_info",
		"--performance-schema-instrument=wait/lock/metadata/sql/mdl=ON"}}, func(s *sandbox.Server) { srv = s }))
}

// A client holds LOCK TABLES t WRITE and another waits to read t: every source names the holder,
// never the waiter, and Waiting finds the waiter.
func TestHoldersOfATableLock(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MyISAM", "INSERT INTO t VALUES (1)")
	ctx := context.Background()
	holder, holderID := conn(t, db)
	if _, err := holder.ExecContext(ctx, "LOCK TABLES t WRITE"); err != nil {
		t.Fatal(err)
	}
	waiter, waiterID := conn(t, db)
	done := make(chan error, 1)
	go func() { _, err := waiter.ExecContext(ctx, "SELECT COUNT(*) FROM `"+schema+"`.`t`"); done <- err }()
	isWaiter := func(id int64) bool { return id == waiterID }
	var waiting []Session
	for deadline := time.Now().Add(10 * time.Second); len(waiting) == 0; time.Sleep(50 * time.Millisecond) {
		var err error
		if waiting, err = Waiting(ctx, db, isWaiter, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never showed as waiting for a lock")
		}
	}
	w := waiting[0]
	tables := []Table{{schema, "t"}, {schema, "_t_new"}}
	if w.ID != waiterID || !IsLockState(w.State) || !w.Mentions(tables) || w.Mentions([]Table{{schema, "t2"}}) {
		t.Fatalf("waiting: %+v", w)
	}
	h := FindHolders(ctx, db, w, tables, isWaiter)
	if h.Source != SourceMetadataLockInfo || !h.Certain || !holds(h, holderID, "MDL_SHARED_NO_READ_WRITE") || holds(h, waiterID, "") {
		t.Errorf("FindHolders: %+v; want connection %d holding MDL_SHARED_NO_READ_WRITE, from metadata_lock_info", h, holderID)
	}
	if !strings.Contains(h.String(), "connection ") || strings.HasPrefix(h.String(), "possibly") {
		t.Errorf("holders described as %q", h.String())
	}
	ps, err := fromPerformanceSchema(ctx, db, tables)
	if err != nil || !strings.Contains(ps[holderID], "SHARED_NO_READ_WRITE") {
		t.Errorf("performance_schema: %v, %v; want %d holding SHARED_NO_READ_WRITE", ps, err, holderID)
	}
	guess := fromProcessList(ctx, db, w, tables, isWaiter, false)
	if guess.Certain || !holds(guess, holderID, "") || holds(guess, waiterID, "") || !strings.HasPrefix(guess.String(), "possibly") {
		t.Errorf("process list: %+v; want connection %d as a candidate", guess, holderID)
	}
	holder.ExecContext(ctx, "UNLOCK TABLES")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func holds(h Holders, id int64, lock string) bool {
	for _, s := range h.Sessions {
		if s.ID == id && strings.Contains(s.Lock, lock) {
			return true
		}
	}
	return false
}

func conn(t *testing.T, db *sql.DB) (*sql.Conn, int64) {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var id int64
	if err := c.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return c, id
}

// BenchmarkWaiting is the cost of one poll of the process list (apply polls every 250 ms), with
// 100 idle client connections besides the benchmark's own.
func BenchmarkWaiting(b *testing.B) {
	db, err := srv.Open("")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(101)
	var conns []*sql.Conn
	for range 100 {
		c, err := db.Conn(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	none := func(int64) bool { return false }
	for b.Loop() {
		if _, err := Waiting(context.Background(), db, none, 500*time.Millisecond); err != nil {
			b.Fatal(err)
		}
	}
}
