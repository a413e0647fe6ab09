package lockwait

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// A statement of the run that names none of its tables (a state-table write) and waits for a
// backup's global read lock is this run's wait too, and reported.
func TestWaitForTheGlobalReadLockIsReported(t *testing.T) {
	ctx := context.Background()
	conn := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	db, err := dbconn.Open(ctx, conn, "", 8) // the run's own connections
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sandboxtest.MustExec(t, db, "CREATE DATABASE IF NOT EXISTS _enginemig_test",
		"CREATE TABLE IF NOT EXISTS _enginemig_test.habits_global (id INT PRIMARY KEY) ENGINE=InnoDB")
	logs := &sandboxtest.SyncBuffer{}
	w := NewWatcher(WatchConfig{DB: db, Own: conn.IsOwn(), Tables: []Table{{Schema: "habits", Name: "t"}}, Abort: func(error) {},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	app, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	backup, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer backup.Close()
	if _, err := backup.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, "REPLACE INTO _enginemig_test.habits_global VALUES (1)")
		written <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "waiting for a lock") && time.Now().Before(deadline) {
		w.pollLocks(ctx, false)
		time.Sleep(pollEvery)
	}
	backup.ExecContext(ctx, "UNLOCK TABLES")
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "waiting for a lock") {
		t.Fatalf("the state write waiting for the backup's lock was not reported:\n%s", logs)
	}
}
