package migration

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
)

// lockIdleLimit is the lock session's idle limit with cutover.DefaultConfig (prepareLockSession).
const lockIdleLimit = 6 * time.Second

// Should enginemig lose the server while its cut-over holds the table (a network that drops
// everything and closes nothing), the server ends the lock's session by itself within its idle
// limit and the application's writes go on: once the table is locked, and once the rename waits
// behind the lock (the sentry, not yet dropped, then fails it). Once the network is back, apply
// swaps (in the same run or the next), and no acknowledged write is lost.
func TestCutoverLockEndsWhenTheServerIsLost(t *testing.T) {
	for _, at := range []struct {
		name string
		set  func(*faults.Hooks, func())
	}{
		{"once locked", func(h *faults.Hooks, f func()) { h.OnLocked = f }},
		{"once the rename waits", func(h *faults.Hooks, f func()) { h.OnRenameQueued = func(int64) { f() } }},
	} {
		t.Run(at.name, func(t *testing.T) {
			schema, db, l, stop := blockedLoad(t)
			defer stop()
			opts := testOptions(srv, schema, "t")
			opts.Cutover = cutover.DefaultConfig()
			lost := loseServerAt(t, srv, &opts, at.set)
			if err := lost.run(t, opts); err != nil {
				t.Logf("apply after the network came back: %v", err)
				if engineOf(t, db, schema, "t") != "MyISAM" {
					t.Fatalf("apply failed (%v) and t is %s", err, engineOf(t, db, schema, "t"))
				}
				opts.Conn = connConfig(srv)
				if _, err := Run(context.Background(), db, opts); err != nil {
					t.Fatalf("the same apply again: %v", err)
				}
			}
			if engineOf(t, db, schema, "t") != "InnoDB" {
				t.Fatalf("t is %s after apply", engineOf(t, db, schema, "t"))
			}
			checkAcked(t, db, l, stop, schema)
		})
	}
}

// lostServer is an apply whose connections go through a proxy that stalls at a cut-over hook.
type lostServer struct {
	proxy   *stallProxy
	hooks   faults.Hooks // the apply's
	stalled chan time.Time
	db      *sql.DB
	direct  *sql.DB
	schema  string
}

// loseServerAt routes opts through a stall proxy in front of s and stalls it the first time the
// hook that set installs is called.
func loseServerAt(t *testing.T, s *sandbox.Server, opts *Options, set func(*faults.Hooks, func())) *lostServer {
	t.Helper()
	p := startStallProxy(t, fmt.Sprintf("127.0.0.1:%d", s.Port))
	cfg := connConfig(s)
	cfg.Port = p.port()
	via, err := dbconn.Open(context.Background(), cfg, "", 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { via.Close() })
	opts.Conn = cfg
	ls := &lostServer{proxy: p, stalled: make(chan time.Time, 1), db: via, direct: openControl(t, s), schema: opts.Schema}
	var once sync.Once
	set(&ls.hooks, func() {
		once.Do(func() {
			p.stall()
			ls.stalled <- time.Now()
		})
	})
	return ls
}

// run runs apply through the proxy; once the proxy stalls it checks that a write to t goes
// through within the lock session's idle limit, then brings the network back and returns
// apply's error.
func (ls *lostServer) run(t *testing.T, opts Options) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := Run(withHooks(context.Background(), ls.hooks), ls.db, opts); done <- err }()
	var at time.Time
	select {
	case at = <-ls.stalled:
	case err := <-done:
		t.Fatalf("apply ended before the network was lost: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("apply did not reach the hook within 2 minutes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockIdleLimit+10*time.Second)
	defer cancel()
	qt := dbconn.QualifiedName(ls.schema, "t")
	if _, err := ls.direct.ExecContext(ctx, "UPDATE "+qt+" SET v = v WHERE id = 1"); err != nil {
		t.Errorf("a write to t after enginemig lost the server: %v", err)
	}
	took := time.Since(at)
	t.Logf("a write to t went through %s after enginemig lost the server", took.Round(10*time.Millisecond))
	if took > lockIdleLimit+2*time.Second {
		t.Errorf("a write to t waited %s for the cut-over's lock (its session's idle limit is %s)", took, lockIdleLimit)
	}
	ls.proxy.cut()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("apply did not return within 2 minutes of the network coming back")
		return nil
	}
}
