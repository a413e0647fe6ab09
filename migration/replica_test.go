package migration

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/pace/throttle"
)

// replicaRun is a primary with a replica apply watches, a 300,000-row MyISAM table t, and apply
// running on it with a slow copy: 1 ms chunks take ~10 s (MariaDB 10.11, 2 cores), long enough to
// see what the replica does to it. adjust changes the options first; done gets apply's result.
type replicaRun struct {
	primary, replica *sandbox.Server
	schema           string
	sdb, db          *sql.DB
	opts             Options
	copied           atomic.Int64
	done             chan error
}

func startReplicaRun(t *testing.T, adjust func(*Options)) *replicaRun {
	r := &replicaRun{done: make(chan error, 1)}
	r.primary = sandboxtest.ForTest(t, sandbox.Options{})
	r.replica = sandboxtest.ReplicaForTest(t, r.primary, sandbox.Options{})
	r.schema, r.sdb = sandboxtest.FreshDatabase(t, r.primary)
	sandboxtest.MustExec(t, r.sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(300000))
	ctx := context.Background()
	if err := sandbox.SyncReplica(ctx, r.primary, r.replica); err != nil {
		t.Fatal(err)
	}
	r.db = openControl(t, r.primary)
	r.opts = testOptions(r.primary, r.schema, "t")
	r.opts.ChunkTime = time.Millisecond
	r.opts.Replicas = append(r.opts.Replicas, connConfig(r.replica))
	r.opts.ProgressEvery = 50 * time.Millisecond
	r.opts.Progress = func(p Progress) { r.copied.Store(p.RowsCopied) }
	if adjust != nil {
		adjust(&r.opts)
	}
	go func() {
		_, err := Run(withHooks(ctx, faults.Hooks{IdleChunkTime: time.Millisecond}), r.db, r.opts)
		r.done <- err
	}()
	for r.copied.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// With a watched replica whose SQL thread is stopped, the copy must pause (lag grows past the
// limit) and continue once replication catches up.
func TestCopyPausesWhileReplicaLags(t *testing.T) {
	// Once replication runs again, the control socket speeds the slow copy up.
	r := startReplicaRun(t, func(o *Options) {
		o.ControlSocket = filepath.Join(t.TempDir(), "ctl.sock")
		o.MaxLag = 300 * time.Millisecond
	})
	ctx, replica, opts, db, schema, copied, done := context.Background(), r.replica, r.opts, r.db, r.schema, &r.copied, r.done
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
	r := startReplicaRun(t, nil) // still copying when the replica breaks
	ctx, primary, replica, sdb, db, schema, done := context.Background(), r.primary, r.replica, r.sdb, r.db, r.schema, r.done
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
