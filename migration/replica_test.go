package migration

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/control"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/pace/throttle"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/sandbox/sandboxtest"
)

// With a watched replica whose SQL thread is stopped, the copy must pause (lag grows past the
// limit) and continue once replication catches up.
func TestCopyPausesWhileReplicaLags(t *testing.T) {
	primary := sandboxtest.ForTest(t, sandbox.Options{})
	replica := sandboxtest.ReplicaForTest(t, primary, sandbox.Options{})
	schema, sdb := sandboxtest.FreshDatabase(t, primary)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(300000))
	ctx := context.Background()
	if err := sandbox.SyncReplica(ctx, primary, replica); err != nil {
		t.Fatal(err)
	}
	db := openControl(t, primary)
	opts := testOptions(primary, schema, "t")
	// A slow copy: 1 ms chunks of 300,000 rows would take ~10 s (MariaDB 10.11, 2 cores), long
	// enough to see it stall; once replication runs again, the control socket speeds it up.
	opts.ChunkTime, opts.seams.IdleChunkTime = time.Millisecond, time.Millisecond
	opts.ControlSocket = filepath.Join(t.TempDir(), "ctl.sock")
	opts.Replicas = append(opts.Replicas, connConfig(replica))
	opts.MaxLag = 300 * time.Millisecond
	var copied atomic.Int64
	opts.ProgressEvery = 50 * time.Millisecond
	opts.Progress = func(p Progress) { copied.Store(p.RowsCopied) }

	done := make(chan error, 1)
	go func() { _, err := Run(ctx, db, opts); done <- err }()
	for copied.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	// Replication stops mid-copy: lag builds up past the limit and the copy must stall.
	if err := replica.StopReplicaSQL(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	stalledAt := copied.Load()
	time.Sleep(2 * time.Second)
	if moved := copied.Load() - stalledAt; moved > 0 || stalledAt >= 300000 {
		t.Fatalf("copy went on while the replica lagged: %d rows at 3 s, %d more in the next 2 s", stalledAt, moved)
	}
	if err := replica.StartReplicaSQL(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := control.Send(ctx, opts.ControlSocket, "chunk-time=200ms"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("copy did not continue after the replica caught up")
	}
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("not converted")
	}
}

// A watched replica whose SQL thread stops on an error applies nothing until a person repairs it:
// apply stops at once with the replica's error (exit 7), rather than waiting for a lag that
// never shrinks, and the original table is left as it was.
func TestApplyStopsWhenAReplicaStopsOnAnError(t *testing.T) {
	primary := sandboxtest.ForTest(t, sandbox.Options{})
	replica := sandboxtest.ReplicaForTest(t, primary, sandbox.Options{})
	schema, sdb := sandboxtest.FreshDatabase(t, primary)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(300000))
	ctx := context.Background()
	if err := sandbox.SyncReplica(ctx, primary, replica); err != nil {
		t.Fatal(err)
	}
	db := openControl(t, primary)
	opts := testOptions(primary, schema, "t")
	// A slow copy (1 ms chunks, as in TestCopyPausesWhileReplicaLags): it is still copying when
	// the replica breaks.
	opts.ChunkTime, opts.seams.IdleChunkTime = time.Millisecond, time.Millisecond
	opts.Replicas = append(opts.Replicas, connConfig(replica))
	var copied atomic.Int64
	opts.ProgressEvery = 50 * time.Millisecond
	opts.Progress = func(p Progress) { copied.Store(p.RowsCopied) }
	done := make(chan error, 1)
	go func() { _, err := Run(ctx, db, opts); done <- err }()
	for copied.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	// The replica already has a row the primary now inserts: its SQL thread stops on 1062.
	sandboxtest.MustExec(t, sdb, "CREATE TABLE clash (id INT PRIMARY KEY)")
	if err := sandbox.SyncReplica(ctx, primary, replica); err != nil {
		t.Fatal(err)
	}
	rdb, err := replica.Open(schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	sandboxtest.MustExec(t, rdb, "INSERT INTO clash VALUES (1)")
	broke := time.Now()
	sandboxtest.MustExec(t, sdb, "INSERT INTO clash VALUES (1)")
	select {
	case err := <-done:
		t.Logf("%s after the replica broke: %v", time.Since(broke).Round(time.Millisecond), err)
		rs := (*throttle.ReplicaStoppedError)(nil)
		if !errors.As(err, &rs) || rs.Errno != 1062 || outcome.CodeOf(err) != outcome.NeedsAttention {
			t.Fatalf("apply returned %v (code %d); want the replica's error 1062, exit 7", err, outcome.CodeOf(err))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("apply went on for a minute with the replica's SQL thread stopped on an error")
	}
	if engineOf(t, db, schema, "t") != "MyISAM" || tableExists(t, db, schema, "_t_new") {
		t.Fatal("the original table is not as it was, or the shadow was left")
	}
}
