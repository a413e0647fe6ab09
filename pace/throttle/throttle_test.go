package throttle

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Short intervals keep the test fast; assertions wait for behaviour with generous deadlines and
// never depend on exact timings.
const (
	testInterval = 50 * time.Millisecond
	eventually   = 20 * time.Second
)

// logRecorder collects the throttler's log records, one text line each.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func (l *logRecorder) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func (l *logRecorder) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// mustProceed asserts Wait returns nil within the eventually deadline.
func mustProceed(t *testing.T, thr *Throttler, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	if err := thr.Wait(ctx); err != nil {
		t.Fatalf("%s: Wait: %v (status %+v)", what, err, thr.Status())
	}
}

// mustBlock waits until the throttler is throttled for a reason containing want and Wait really
// blocks (for 300 ms). A throttled status can be a measurement taken before the change the caller
// made (a replica catching up under a loaded machine lagged 302 ms just before its SQL thread was
// stopped, and the next check, after the stop, found 100 ms): it must then be throttled again, for
// the new reason, before the eventually deadline.
func mustBlock(t *testing.T, thr *Throttler, want, what string) Status {
	t.Helper()
	deadline := time.Now().Add(eventually)
	for {
		st := thr.Status()
		if st.Throttled && strings.Contains(st.Reason, want) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := thr.Wait(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Wait returned %v while throttled (%s)", what, err, st.Reason)
			}
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not throttled with reason %q: %+v", what, want, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReplicaLag(t *testing.T) {
	ctx := context.Background()
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

	var logs logRecorder
	thr := New(pdb, Config{Replicas: []*sql.DB{rdb}, ReplicaNames: []string{"r1"}, MaxLag: 300 * time.Millisecond,
		Interval: testInterval, Logger: logs.logger()})
	if err := thr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer thr.Stop()

	mustProceed(t, thr, "healthy replica")
	if st := thr.Status(); len(st.Replicas) != 1 || !st.Replicas[0].Measured || st.Replicas[0].Lag > 300*time.Millisecond {
		t.Fatalf("healthy replica status: %+v", st)
	}

	if err := replica.StopReplicaSQL(ctx); err != nil {
		t.Fatal(err)
	}
	st := mustBlock(t, thr, "replica r1 lags", "SQL thread stopped")
	if st.Replicas[0].Lag <= 300*time.Millisecond {
		t.Fatalf("throttled on lag but lag %s is within the limit", st.Replicas[0].Lag)
	}

	// A Wait that is already blocked returns once the replica catches up.
	done := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, eventually)
		defer cancel()
		done <- thr.Wait(wctx)
	}()
	if err := replica.StartReplicaSQL(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait after START SLAVE: %v (status %+v)", err, thr.Status())
	}

	// Raising the limit live releases the copy even while the replica lags.
	if err := replica.StopReplicaSQL(ctx); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, thr, "lags", "SQL thread stopped again")
	thr.SetMaxLag(time.Hour)
	mustProceed(t, thr, "max lag raised")
	thr.SetMaxLag(300 * time.Millisecond)
	if err := replica.StartReplicaSQL(ctx); err != nil {
		t.Fatal(err)
	}
	mustProceed(t, thr, "replica caught up again")

	// An unreachable replica fails closed.
	if err := replica.Stop(); err != nil {
		t.Fatal(err)
	}
	mustBlock(t, thr, "cannot measure lag on r1", "replica stopped")

	// State changes are logged, checks are not: a handful of lines over hundreds of checks.
	lines := logs.all()
	if len(lines) == 0 || len(lines) > 20 {
		t.Fatalf("want a few log lines on state changes, got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	// Lag is Info; failing closed because lag cannot be measured is a Warn with the reason.
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, `level=INFO msg="copy throttled" reason="replica r1 lags`) ||
		!strings.Contains(all, `level=WARN msg="copy throttled" reason="cannot measure lag on r1`) {
		t.Errorf("throttle log lacks the expected records:\n%s", all)
	}
	t.Logf("log:\n%s", all)
}

func TestPrimaryOnly(t *testing.T) {
	primary := sandboxtest.ForTest(t, sandbox.Options{})
	pdb, err := primary.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()

	t.Run("ThreadsRunning", func(t *testing.T) {
		thr := New(pdb, Config{Interval: testInterval})
		if err := thr.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer thr.Stop()
		mustProceed(t, thr, "no limit")
		base := thr.Status().ThreadsRunning
		if base < 1 {
			t.Fatalf("Threads_running not measured: %+v", thr.Status())
		}
		thr.SetMaxThreadsRunning(int(base) + 1)
		mustProceed(t, thr, "idle server")

		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pdb.Exec("SELECT SLEEP(2)")
			}()
		}
		mustBlock(t, thr, "Threads_running", "busy server")
		wg.Wait()
		mustProceed(t, thr, "sleeps finished")
	})

	t.Run("Pause", func(t *testing.T) {
		thr := New(pdb, Config{Interval: testInterval})
		if err := thr.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer thr.Stop()
		thr.SetPaused(true)
		mustBlock(t, thr, "paused", "paused")
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), eventually)
			defer cancel()
			done <- thr.Wait(ctx)
		}()
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v while paused", err)
		case <-time.After(200 * time.Millisecond):
		}
		thr.SetPaused(false)
		if err := <-done; err != nil {
			t.Fatalf("Wait after resume: %v", err)
		}
		thr.Stop()
		if err := thr.Wait(context.Background()); !errors.Is(err, ErrStopped) {
			t.Fatalf("Wait after Stop: %v, want ErrStopped", err)
		}
	})
}
