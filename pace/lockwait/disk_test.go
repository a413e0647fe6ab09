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

// A holder stuck writing while the disk is short, or waiting for space, makes the wait the disk's.
func TestDiskHolding(t *testing.T) {
	w := NewWatcher(WatchConfig{Disk: func() string { return "disk: datadir on /data: 1.0 MiB free" }})
	if got := w.diskHolding([]Session{{ID: 7, State: "Writing to binlog"}}); !strings.Contains(got, "/data") || !strings.Contains(got, "connection 7") {
		t.Errorf("a holder writing its binlog on a short disk: %q", got)
	}
	if got := w.diskHolding([]Session{{ID: 7, Command: "Sleep"}}); got != "" {
		t.Errorf("an idle holder (LOCK TABLES) blamed on the disk: %q", got)
	}
	healthy := NewWatcher(WatchConfig{Disk: func() string { return "" }})
	if got := healthy.diskHolding([]Session{{ID: 7, State: "Writing to binlog"}}); got != "" {
		t.Errorf("a holder writing while the disk has room blamed on the disk: %q", got)
	}
	if got := healthy.diskHolding([]Session{{ID: 8, State: "Waiting for someone to free space"}}); !strings.Contains(got, "full") {
		t.Errorf("a holder waiting for space: %q", got)
	}
}

// A connection whose statements queue one after another behind the same holder (a copy's
// chunks) is one wait: one line when it starts and one when it ends, not one pair per statement.
func TestRepeatedWaitsAreOneWait(t *testing.T) {
	ctx := context.Background()
	conn := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	db, err := dbconn.Open(ctx, conn, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sandboxtest.MustExec(t, db, "CREATE DATABASE IF NOT EXISTS repeat_wait",
		"CREATE TABLE IF NOT EXISTS repeat_wait.t (id INT PRIMARY KEY) ENGINE=MyISAM")
	app, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	holder, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	logs := &sandboxtest.SyncBuffer{}
	w := NewWatcher(WatchConfig{DB: db, Own: conn.IsOwn(), Tables: []Table{{Schema: "repeat_wait", Name: "t"}}, Abort: func(error) {},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	stop := w.Start(ctx, nil)
	waiter, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	// Four statements, each waiting about 0.9 s for the holder's lock, 0.1 s apart.
	for i := 0; i < 4; i++ {
		if _, err := holder.ExecContext(ctx, "LOCK TABLES repeat_wait.t WRITE"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := waiter.ExecContext(ctx, "REPLACE INTO `repeat_wait`.`t` VALUES (1)")
			done <- err
		}()
		time.Sleep(900 * time.Millisecond)
		holder.ExecContext(ctx, "UNLOCK TABLES")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(endGrace + 2*pollEvery)
	stop()
	out := logs.String()
	if n, m := strings.Count(out, `msg="waiting for a lock"`), strings.Count(out, `msg="lock wait over"`); n != 1 || m != 1 {
		t.Fatalf("%d 'waiting for a lock' and %d 'lock wait over' lines for one wait, want 1 and 1:\n%s", n, m, out)
	}
	if w.Seen() != 1 {
		t.Errorf("Seen %d, want 1", w.Seen())
	}
}
