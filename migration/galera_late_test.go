package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
)

// galeraConverted converts a small t on node 1 under writers, and returns it converted on every
// node with the writers still running, and the apply's options.
func galeraConverted(t *testing.T, c *sandboxtest.Cluster) (string, *sql.DB, *ackload.Load, func(), Options) {
	t.Helper()
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	l, err := ackload.Create(context.Background(), db, schema, "t", ackload.Config{Writers: 2, RowsPerWriter: 300, Pause: 300 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := l.Start()
	t.Cleanup(stop)
	opts := testOptions(c.Nodes[0], schema, "t")
	if _, err := runBounded(context.Background(), t, opts, c); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for i, n := range c.Nodes[1:] {
		ndb := openControl(t, n)
		for end := time.Now().Add(10 * time.Second); engineOf(t, ndb, schema, "t") != "InnoDB"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("node %d: t is not InnoDB 10 s after apply", i+2)
			}
		}
	}
	return schema, db, l, stop, opts
}

// lateRollbackOptions: the application stops writing just before the rename is sent (the
// OnLocked hook), so that the InnoDB table set aside must hold every acknowledged write; two
// attempts at most, so that a swap not reported as done fails fast. The rollback runs with the
// hooks returned.
func lateRollbackOptions(opts Options, stop func()) (rollback.Options, faults.Hooks) {
	ropts := rollback.Options{Conn: opts.Conn, Schema: opts.Schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger, Cutover: cutover.DefaultConfig()}
	ropts.Cutover.Attempts, ropts.Cutover.Backoff = 2, 50*time.Millisecond
	var once sync.Once
	return ropts, faults.Hooks{ReplayDelay: 20 * time.Millisecond, OnLocked: func() { once.Do(stop) }}
}

// galeraRollbackLate: the gate's session is killed while the rename waits at it, so the rename
// goes through before the catch-up at the gate (the test waits for it). With the application
// writing the MyISAM t at once, the catch-up cannot finish (that write is not To's to take), and
// the rollback must report the late swap (cutover.ErrRenamedLate) with exit code 7 and where
// every change is: the InnoDB table set aside (_t_new) holds every acknowledged write, the
// MyISAM t the one made after. The cluster keeps 3 synced nodes, serves writes on t at once, no
// session is left waiting or gate left behind, and the conversion is recorded as rolled back.
// With replay done and nothing written after the rename, the catch-up at the gate finds To
// complete: the same kill is then a rollback that lost nothing, and reported as done.
func galeraRollbackLate(t *testing.T, c *sandboxtest.Cluster) {
	for _, settled := range []bool{false, true} {
		schema, db, l, stop, opts := galeraConverted(t, c)
		ropts, hooks := lateRollbackOptions(opts, stop)
		if settled {
			hooks.OnLocked = func() {
				stop()
				for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if _, diffs, err := l.Check(context.Background(), db, schema, table.OldName("t")); err == nil && len(diffs) == 0 {
						return // replay has applied every acknowledged write to _t_old
					} else if time.Now().After(end) {
						t.Errorf("_t_old did not catch up within 10 s: %v %v", err, diffs)
						return
					}
				}
			}
		}
		killed := false
		hooks.OnRenameQueued = func(gate int64) {
			if _, err := db.Exec(fmt.Sprintf("KILL %d", gate)); err != nil {
				t.Errorf("kill the gate's session %d: %v", gate, err)
			}
			killed = true
			for end := time.Now().Add(10 * time.Second); engineOf(t, db, schema, "t") != "MyISAM"; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(end) {
					t.Errorf("the rename did not go through within 10 s of the gate's session killed")
					return
				}
			}
			if !settled {
				sandboxtest.MustExec(t, db, "INSERT INTO `"+schema+"`.t (id, v) VALUES (999999998, 2)")
			}
		}
		res, err := rollbackBounded(withHooks(context.Background(), hooks), t, db, ropts, c)
		if !killed {
			t.Fatalf("the rename never waited at the gate: %v", err)
		}
		if settled {
			if err != nil {
				t.Fatalf("a rollback whose gate was killed after To caught up: %v", err)
			}
			t.Logf("rollback with the gate killed after replay caught up: %d changes replayed", res.CaptureChanges)
			checkRolledBackOnGalera(t, c, db, l, schema)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "the rename went through before the gate was opened (was the gate's session killed?)") {
			t.Errorf("the message does not say the rename went through before the gate was opened: %v", err)
		}
		checkLateSwap(t, c, db, l, ropts, hooks, err)
		var v int
		if err := db.QueryRow("SELECT v FROM `" + schema + "`.t WHERE id = 999999998").Scan(&v); err != nil || v != 2 {
			t.Errorf("the write made right after the rename: %d, %v", v, err)
		}
	}
}

// checkLateSwap checks what a swap back run with hooks reported late (err) left: see
// galeraRollbackLate.
func checkLateSwap(t *testing.T, c *sandboxtest.Cluster, db *sql.DB, l *ackload.Load, ropts rollback.Options, hooks faults.Hooks, err error) {
	t.Helper()
	schema := ropts.Schema
	t.Logf("rollback: %v", err)
	if swapped := (*cutover.SwappedError)(nil); outcome.CodeOf(err) != outcome.NeedsAttention || !errors.Is(err, cutover.ErrRenamedLate) || !errors.As(err, &swapped) {
		t.Fatalf("a swap back renamed late: code %d, %v; want code %d with cutover.ErrRenamedLate in a SwappedError", outcome.CodeOf(err), err, outcome.NeedsAttention)
	}
	for _, want := range []string{"t (the table swapped in) may lack changes", "_t_new (the table swapped out) has every change up to the rename", "the MyISAM table is live; compare it with _t_new"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message does not say %q", want)
		}
	}
	for _, p := range l.Problems(1000) {
		if !strings.Contains(p, "1213") {
			t.Errorf("the application saw: %s", p)
		}
	}
	checked, diffs, cerr := l.Check(context.Background(), db, schema, table.ShadowName("t"))
	if cerr != nil {
		t.Fatal(cerr)
	}
	if len(diffs) > 0 {
		t.Fatalf("_t_new lacks acknowledged writes:\n%s", strings.Join(diffs, "\n"))
	}
	_, missing, _ := l.Check(context.Background(), db, schema, "t")
	t.Logf("_t_new has all %d acknowledged rows; the MyISAM t differs in %d row(s) (10 at most counted)", checked, len(missing))
	// t serves writes at once, and they reach nowhere but node 1's MyISAM table.
	begin := time.Now()
	sandboxtest.MustExec(t, db, "INSERT INTO `"+schema+"`.t (id, v) VALUES (999999999, 1)")
	if took := time.Since(begin); took > time.Second {
		t.Errorf("a write on t after the late swap took %s", took)
	}
	checkSwappedBack(t, c, schema, "the late swap")
	var v int
	if err := db.QueryRow("SELECT v FROM `" + schema + "`.t WHERE id = 999999999").Scan(&v); err != nil || v != 1 {
		t.Errorf("the write after the late swap: %d, %v", v, err)
	}
	// The conversion is recorded as rolled back: the same rollback again has nothing to do.
	hooks.OnLocked, hooks.OnRenameQueued = nil, nil
	if _, err := rollback.Run(withHooks(context.Background(), hooks), db, ropts); outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "already rolled back") {
		t.Errorf("the same rollback after the late swap: code %d, %v; want a refusal, already rolled back", outcome.CodeOf(err), err)
	}
}

// galeraGateIdle: enginemig loses node 1 while the rename waits at the gate, without the server
// seeing a connection close (a proxy that stops forwarding). The server drops the gate's idle
// session after its wait_timeout (GateWait + 2 CatchUp + 2 s, here 4 s) and the rename goes on,
// so nothing waits longer than that. Once the network is back, the rollback learns from the
// tables that the rename went through, and reports the late swap (code 7).
func galeraGateIdle(t *testing.T, c *sandboxtest.Cluster) {
	schema, db, l, stop, opts := galeraConverted(t, c)
	proxy := startStallProxy(t, fmt.Sprintf("127.0.0.1:%d", c.Nodes[0].Port))
	cfg := connConfig(c.Nodes[0])
	cfg.Port = proxy.port()
	viaProxy, err := dbconn.Open(context.Background(), cfg, "", 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { viaProxy.Close() })
	ropts, hooks := lateRollbackOptions(opts, stop)
	hooks.GateWait = time.Second
	idleLimit := 4 * time.Second // GateWait + 2 CatchUp + 2 s
	stalled := make(chan time.Time, 1)
	var once sync.Once
	hooks.OnRenameQueued = func(int64) {
		once.Do(func() {
			proxy.stall()
			stalled <- time.Now()
		})
	}
	type ended struct{ err error }
	done := make(chan ended, 1)
	go func() {
		_, err := rollback.Run(withHooks(context.Background(), hooks), viaProxy, ropts)
		done <- ended{err}
	}()
	var at time.Time
	select {
	case at = <-stalled:
	case e := <-done:
		t.Fatalf("the rollback ended before its rename waited at the gate: %v", e.err)
	case <-time.After(2 * time.Minute):
		c.Stop()
		t.Fatal("the rename did not reach the gate within 2 minutes")
	}
	// The server, not enginemig, ends the wait: the rename must go through on node 1 within the
	// gate session's idle limit.
	limit := idleLimit + 2*time.Second
	for engineOf(t, db, schema, "t") != "MyISAM" {
		if time.Since(at) > limit {
			t.Errorf("the rename still waits %s after enginemig lost the server (the gate's session idle limit is %s)", limit, idleLimit)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the rename went through %s after enginemig lost the server", time.Since(at).Round(10*time.Millisecond))
	proxy.cut()
	var e ended
	select {
	case e = <-done:
	case <-time.After(time.Minute):
		c.Stop()
		t.Fatal("the rollback did not return within a minute of the network coming back")
	}
	checkLateSwap(t, c, db, l, ropts, hooks, e.err)
}

// galeraApplyLost: enginemig loses the server (a network that drops everything and closes
// nothing) once its rename waits in total order behind the cut-over's lock, where every commit of
// the node waits behind the rename. The server ends the lock's session within its idle limit, the
// rename goes first, and the node serves writes again; once the network is back, apply learns
// from the tables that the rename went through and reports the swap done.
func galeraApplyLost(t *testing.T, c *sandboxtest.Cluster) {
	schema, db, l, stop := galeraLoad(t, c, true)
	defer stop()
	opts := testOptions(c.Nodes[0], schema, "t")
	opts.Cutover = cutover.DefaultConfig()
	lost := loseServerAt(t, c.Nodes[0], &opts, func(h *faults.Hooks, f func()) { h.OnRenameQueued = func(int64) { f() } })
	if err := lost.run(t, opts); err != nil {
		t.Fatalf("apply whose queued rename's answer was lost: %v", err)
	}
	if w := waitingSessions(t, db); len(w) > 0 {
		t.Errorf("sessions left waiting: %v", w)
	}
	checkAcked(t, db, l, stop, schema)
	galeraSame(t, c, schema, "t")
}
