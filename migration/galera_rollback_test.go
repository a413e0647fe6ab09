package migration

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/cleanup"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/go-sql-driver/mysql"
)

// galeraRollback: apply under writers on node 1, then writers on every node write the InnoDB
// table, then rollback under them; the application moves its writes back to node 1 at the
// swap (the test's hook OnLocked: the moment just before the rename is sent, so the other nodes'
// last writes are still on their way to node 1). Node 1's MyISAM table must hold every
// acknowledged write, the cluster keep 3 synced nodes, and no session be left waiting.
func galeraRollback(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	pools := make([]*sql.DB, len(c.Nodes))
	for i, n := range c.Nodes {
		cfg := n.Config("")
		cfg.Params = map[string]string{"wsrep_sync_wait": "1"} // a writer moved to node 1 reads its own earlier writes
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pools[i] = sql.OpenDB(conn)
		t.Cleanup(func() { pools[i].Close() })
	}
	// Writers 1 and 2 (of 0-3) write through nodes 2 and 3 while spread and not back. Moving
	// them back waits for their statements in flight there: one sent to node 2 that ran after
	// the rename would write node 2's own MyISAM table, a write on the wrong node by definition.
	var spread, back atomic.Bool
	var inFlight sync.RWMutex
	via := func(w int) (*sql.DB, func()) {
		inFlight.RLock()
		if spread.Load() && !back.Load() && w > 0 && w < len(pools) {
			return pools[w], inFlight.RUnlock
		}
		inFlight.RUnlock()
		return pools[0], nil
	}
	l, err := ackload.Create(context.Background(), db, schema, "t", ackload.Config{Writers: 4, RowsPerWriter: 500, Pause: 300 * time.Microsecond, Via: via})
	if err != nil {
		t.Fatal(err)
	}
	stop := l.Start()
	defer stop()
	opts := testOptions(c.Nodes[0], schema, "t")
	if _, err := runBounded(context.Background(), t, opts, c); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for i, p := range pools[1:] {
		for end := time.Now().Add(10 * time.Second); engineOf(t, p, schema, "t") != "InnoDB"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("node %d: t is not InnoDB 10 s after apply", i+2)
			}
		}
	}
	spread.Store(true)
	time.Sleep(500 * time.Millisecond)

	ropts := rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger, Cutover: cutover.DefaultConfig()}
	galeraRollbackGivesUp(t, c, db, ropts)
	hooks := faults.Hooks{ReplayDelay: 20 * time.Millisecond} // replay a little behind, as under load: the gate must wait for it
	hooks.OnLocked = func() {
		back.Store(true)
		inFlight.Lock()
		inFlight.Unlock() //lint:ignore SA2001 waits for the statements in flight on nodes 2 and 3
	}
	begin := time.Now()
	res, err := rollbackBounded(withHooks(context.Background(), hooks), t, db, ropts, c)
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	t.Logf("rollback: %d changes replayed, %d attempt(s), rename held at the gate %s, total %s (test %s)", res.CaptureChanges, res.Cutover.Attempts,
		res.Cutover.LockHeld.Round(time.Millisecond), res.TotalTime.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	time.Sleep(200 * time.Millisecond)
	stop()
	checkRolledBackOnGalera(t, c, db, l, schema)

	// A gate left by a rollback that died goes with cleanup, on every node.
	sandboxtest.MustExec(t, db, "CREATE TABLE `"+schema+"`.`#t_gate` (id INT PRIMARY KEY) ENGINE=InnoDB COMMENT='"+cutover.GateComment+"'")
	cres, err := cleanup.Run(context.Background(), db, cleanup.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema})
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	waitGone := func(p *sql.DB, name string) bool {
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if !tableExists(t, p, schema, name) {
				return true
			}
		}
		return false
	}
	for i, p := range pools {
		if !waitGone(p, "#t_gate") {
			t.Errorf("node %d: the gate is still there after cleanup (dropped %v)", i+1, cres.Dropped)
		}
	}
}

// galeraRollbackGivesUp: a swap back whose capture cannot catch up within --cutover-catch-up
// (replay kept 100 ms behind, 50 ms allowed) gives up after its attempts, changing nothing: the
// InnoDB table stays live on every node, the cluster serves the writers, nothing is left waiting
// and no gate is left; the same rollback can run again.
func galeraRollbackGivesUp(t *testing.T, c *sandboxtest.Cluster, db *sql.DB, opts rollback.Options) {
	t.Helper()
	opts.Cutover.CatchUp, opts.Cutover.Attempts, opts.Cutover.Backoff = 50*time.Millisecond, 2, 50*time.Millisecond
	_, err := rollbackBounded(withHooks(context.Background(), faults.Hooks{ReplayDelay: 100 * time.Millisecond}), t, db, opts, c)
	if outcome.CodeOf(err) != outcome.FailedSafe || !errors.Is(err, cutover.ErrGaveUp) {
		t.Fatalf("a rollback that cannot catch up: code %d, %v", outcome.CodeOf(err), err)
	}
	for i, n := range c.Nodes {
		ndb := openControl(t, n)
		if e := engineOf(t, ndb, opts.Schema, "t"); e != "InnoDB" || tableExists(t, ndb, opts.Schema, table.GateName("t")) {
			t.Errorf("node %d after a rollback that gave up: t is %s, gate left: %v", i+1, e, tableExists(t, ndb, opts.Schema, table.GateName("t")))
		}
		if w := waitingSessions(t, ndb); len(w) > 0 {
			t.Errorf("node %d: sessions left waiting after a rollback that gave up: %v", i+1, w)
		}
	}
}

// rollbackBounded runs a rollback under ctx (which may carry the test's hooks) and fails the test,
// instead of hanging, should it wedge the node.
func rollbackBounded(ctx context.Context, t *testing.T, db *sql.DB, opts rollback.Options, c *sandboxtest.Cluster) (*rollback.Result, error) {
	t.Helper()
	type ended struct {
		res *rollback.Result
		err error
	}
	done := make(chan ended, 1)
	go func() { res, err := rollback.Run(ctx, db, opts); done <- ended{res, err} }()
	select {
	case e := <-done:
		return e.res, e.err
	case <-time.After(3 * time.Minute):
		c.Stop()
		t.Fatal("rollback on a Galera node did not return within 3 minutes (a wedged swap?)")
		return nil, nil
	}
}

// checkRolledBackOnGalera: node 1's t is the MyISAM table with every acknowledged write; every
// node has the InnoDB table as _t_new and a MyISAM t; 3 nodes synced, nobody left waiting.
func checkRolledBackOnGalera(t *testing.T, c *sandboxtest.Cluster, db *sql.DB, l *ackload.Load, schema string) {
	t.Helper()
	st := l.Stats()
	for _, p := range l.Problems(1000) {
		if !strings.Contains(p, "1213") { // a write the cluster aborted at the rename is the application's to retry
			t.Errorf("the application saw: %s", p)
		}
	}
	checked, diffs, err := l.Check(context.Background(), db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("node 1's MyISAM table lacks acknowledged writes:\n%s", strings.Join(diffs, "\n"))
	}
	t.Logf("%d writes and %d reads acknowledged (%d errors 1213, %d stale reads), %d rows identical", st.Acked, st.Reads, st.Errors, st.Stale, checked)
	if st.Stale > 0 {
		t.Errorf("%d stale reads", st.Stale)
	}
	checkSwappedBack(t, c, schema, "the rollback")
}

// checkSwappedBack checks every node after a swap back on a Galera node (after what): synced, t
// the MyISAM original and _t_new the InnoDB table, no session left waiting, no gate left.
func checkSwappedBack(t *testing.T, c *sandboxtest.Cluster, schema, after string) {
	t.Helper()
	for i, n := range c.Nodes {
		ndb := openControl(t, n)
		if err := sandboxtest.WaitSynced(context.Background(), ndb, len(c.Nodes)); err != nil {
			t.Errorf("node %d after %s: %v", i+1, after, err)
		}
		var rows int
		ndb.QueryRow("SELECT COUNT(*) FROM `" + schema + "`.t").Scan(&rows)
		if e, a := engineOf(t, ndb, schema, "t"), engineOf(t, ndb, schema, "_t_new"); e != "MyISAM" || a != "InnoDB" {
			t.Errorf("node %d: t is %s (%d rows), _t_new %s", i+1, e, rows, a)
		}
		if w := waitingSessions(t, ndb); len(w) > 0 {
			t.Errorf("node %d: sessions left waiting: %v", i+1, w)
		}
		var gates int
		ndb.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE '#%'", schema).Scan(&gates)
		if gates > 0 {
			t.Errorf("node %d: the swap-back's gate is left behind", i+1)
		}
	}
}
