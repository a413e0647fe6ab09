package sandbox_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

func TestReplicaFollowsPrimary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary := sandboxtest.ForTest(t, sandbox.Options{})
	replica := sandboxtest.ReplicaForTest(t, primary, sandbox.Options{})

	pdb, err := primary.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	rdb, err := replica.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()

	var id int
	if err := rdb.QueryRow("SELECT @@server_id").Scan(&id); err != nil || id < 2 {
		t.Fatalf("replica server_id=%d err=%v, want >= 2", id, err)
	}
	sandboxtest.MustExec(t, pdb, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO r.t VALUES (1)")
	if err := sandbox.SyncReplica(ctx, primary, replica); err != nil {
		t.Fatal(err)
	}
	if n := count(t, rdb); n != 1 {
		t.Fatalf("replica has %d rows, want 1", n)
	}

	// With the SQL thread stopped the replica falls behind; started again, it catches up.
	if err := replica.StopReplicaSQL(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := replica.ReplicaStatus(ctx)
	if err != nil || !st.IORunning || st.SQLRunning {
		t.Fatalf("after StopReplicaSQL: %+v err=%v", st, err)
	}
	sandboxtest.MustExec(t, pdb, "INSERT INTO r.t VALUES (2)")
	time.Sleep(200 * time.Millisecond)
	if n := count(t, rdb); n != 1 {
		t.Fatalf("replica applied a row with its SQL thread stopped: %d rows", n)
	}
	// A stopped SQL thread fails the sync at once, saying where it stands.
	if err := sandbox.SyncReplica(ctx, primary, replica); err == nil || st.ExecutedFile == "" || st.ExecutedPos == "" {
		t.Fatalf("sync with the SQL thread stopped: %v (status %+v)", err, st)
	}
	if err := replica.StartReplicaSQL(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.SyncReplica(ctx, primary, replica); err != nil {
		t.Fatal(err)
	}
	if n := count(t, rdb); n != 2 {
		t.Fatalf("replica has %d rows after catching up, want 2", n)
	}
}

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM r.t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
