package throttle

import (
	"context"
	"database/sql"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// latencyApp is an application with room to spare: 20 threads, each reading a row by key and
// updating one every 80 ms (a ticker, which drops the ticks a busy thread misses). Waits of up to
// a few tens of milliseconds slow its statements but cost it no request, so its throughput holds
// while its latency rises. served counts the requests done.
func latencyApp(ctx context.Context, db *sql.DB, served, failed *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 43))
			Sleep(ctx, time.Duration(i)*4*time.Millisecond)
			tick := time.NewTicker(80 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				var v int
				err := db.QueryRow("SELECT v FROM t WHERE id = ?", 1+r.IntN(1000)).Scan(&v)
				if err == nil {
					_, err = db.Exec("UPDATE t SET v = v + 1 WHERE id = ?", 1+r.IntN(1000))
				}
				if err != nil {
					failed.Add(1)
				} else {
					served.Add(1)
				}
			}
		}(i)
	}
	return &wg
}

// lockRepeatedly locks t for hold, then lets it go for four times as long, until ctx ends: the
// application's reads queue behind its writes waiting for the lock. held, when set, is told of
// each lock as the copy tells the pace of its chunks'.
func lockRepeatedly(ctx context.Context, conn *sql.Conn, hold time.Duration, held func(from, to time.Time)) error {
	for ctx.Err() == nil {
		if _, err := conn.ExecContext(ctx, "LOCK TABLES t WRITE"); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while it waited for the lock
			}
			return err
		}
		from := time.Now()
		time.Sleep(hold)
		if _, err := conn.ExecContext(context.Background(), "UNLOCK TABLES"); err != nil {
			return err
		}
		if held != nil {
			held(from, time.Now())
		}
		Sleep(ctx, 4*hold)
	}
	return nil
}

// locking runs lockRepeatedly on its own session until the returned function is called.
func locking(t *testing.T, db *sql.DB, hold time.Duration, held func(from, to time.Time)) (stop func()) {
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lockRepeatedly(ctx, conn, hold, held) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		conn.Close()
	}
}

// The latency target on a real server. The application keeps its throughput throughout; its
// reads of the table start to wait (another session locks it for the target and 4 ms more, a
// fifth of the time). While those locks are not the copy's, the chunks' lock bound stays: a
// read slow for another reason says nothing about the chunks. Once they are (the session tells
// the pace of each, as the copy does of its chunks), the pace shortens the bound down to the
// shortest (shorter chunks would not help against a lock that is not theirs) and logs it once
// with reason latency; once they stop the bound lengthens again (that the pace then also rests
// longer is TestGovernorRestsWhenChunksCannotGetShorter's). Judged against the same run's
// figures: the bound before the waits, the application's rate before them, the target learned.
func TestPaceShortensChunksWhenTheApplicationsLatencyRises(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, 0 FROM "+sandboxtest.Seq(1000))
	db.SetMaxOpenConns(24)
	ctx, stopApp := context.WithCancel(context.Background())
	var served, failed atomic.Int64
	app := latencyApp(ctx, db, &served, &failed)
	defer func() { stopApp(); app.Wait() }()

	var log logRecorder
	g := NewGentle(db, GentleConfig{Interval: testInterval, ProbeEvery: 5 * time.Millisecond, Logger: log.logger(),
		Probe: func(ctx context.Context) error {
			var id int
			return db.QueryRowContext(ctx, "SELECT id FROM t ORDER BY id LIMIT 1").Scan(&id)
		}})
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	st := g.State()
	target := seconds(st.LatencyTarget)
	g.mu.Lock()
	shortest := g.gov.lat.shortest() // half the target's slack over the usual read
	g.mu.Unlock()
	if target < latencyFloor || st.LatencyBaseline <= 0 {
		t.Fatalf("learned a baseline of %s and a target of %s; want a baseline and a target of at least %s", seconds(st.LatencyBaseline), target, latencyFloor)
	}
	// Before the waits: the bound is engaged (the application is busy), starts at the slack,
	// twice the shortest, and grows while the reads keep within the target.
	servedAt, at := served.Load(), time.Now()
	before := watch(g, 2*time.Second, func(s GentleState) bool { return exact(s.ChunkLockBound) >= 4*shortest })
	rate0 := float64(served.Load()-servedAt) / time.Since(at).Seconds()
	if before.bound <= shortest {
		t.Fatalf("before any wait the bound was %s: the application's own reads passed the target (%s), so nothing is left to show", before.bound, target)
	}
	hold := target + latencyFloor

	stop := locking(t, db, hold, nil)
	servedAt, at = served.Load(), time.Now()
	foreign := watch(g, time.Second, func(GentleState) bool { return false })
	rate1 := float64(served.Load()-servedAt) / time.Since(at).Seconds()
	stop()
	t.Logf("before: bound %s, p99 %s; with locks not the copy's: bound %s, p99 up to %s (target %s, baseline %s); application %.0f requests/s before, %.0f during",
		before.bound, before.p99, foreign.lowest, foreign.p99, target, seconds(st.LatencyBaseline), rate0, rate1)
	if foreign.p99 <= target {
		t.Fatalf("the reads' p99 stayed at %s, within the target %s: the locks did not reach the probe", foreign.p99, target)
	}
	if foreign.lowest < foreign.first {
		t.Errorf("reads slowed by locks that were not the copy's brought the chunks' lock bound from %s down to %s, want it left alone", foreign.first, foreign.lowest)
	}

	stop = locking(t, db, hold, g.Held)
	servedAt, at = served.Load(), time.Now()
	during := watch(g, 8*time.Second, func(s GentleState) bool { return exact(s.ChunkLockBound) <= shortest })
	rate := rate1 // a phase this short says nothing of the rate
	if took := time.Since(at); took > 200*time.Millisecond {
		rate = float64(served.Load()-servedAt) / took.Seconds()
	}
	stop()
	t.Logf("with the copy's locks: bound %s down to %s, p99 up to %s, within %s; application %.0f requests/s",
		during.first, during.bound, during.p99, time.Since(at).Round(time.Millisecond), rate)
	if min(rate, rate1) < 0.9*rate0 {
		t.Fatalf("the application's throughput fell from %.0f to %.0f requests/s: the test meant its latency to rise, not its throughput to fall", rate0, min(rate, rate1))
	}
	if during.bound > shortest || during.bound >= during.first {
		t.Fatalf("with the reads' p99 at %s over a target of %s, waiting for the copy's locks, the chunks' lock bound went from %s to %s within 8 s, want it down to the shortest, %s",
			during.p99, target, during.first, during.bound, shortest)
	}

	at = time.Now()
	after := watch(g, 4*time.Second, func(s GentleState) bool { return exact(s.ChunkLockBound) >= 2*during.bound })
	t.Logf("after the locks: bound up to %s within %s", after.bound, time.Since(at).Round(time.Millisecond))
	if after.bound < 2*during.bound {
		t.Errorf("after the locks stopped the chunks' lock bound reached only %s within 4 s, want it lengthened to twice its shortest, %s, or more", after.bound, 2*during.bound)
	}
	var shortened int
	for _, l := range log.all() {
		if strings.Contains(l, "copy shortens its chunks") && strings.Contains(l, "reason=latency") {
			shortened++
		}
	}
	if shortened != 1 {
		t.Errorf("logged the latency target's shortening %d times, want once:\n%s", shortened, strings.Join(log.all(), "\n"))
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d application requests failed", n)
	}
}

// exact turns a status figure back into the duration it was made from.
func exact(secs float64) time.Duration { return time.Duration(math.Round(secs * float64(time.Second))) }

// seen is what watch saw of the pace's bound (the first, the lowest, the last) and the highest
// p99.
type seen struct{ first, lowest, bound, p99 time.Duration }

// watch samples g's state every 20 ms for up to d, until done says so.
func watch(g *Gentle, d time.Duration, done func(GentleState) bool) seen {
	var out seen
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		s := g.State()
		out.bound, out.p99 = exact(s.ChunkLockBound), max(out.p99, seconds(s.LatencyP99))
		if out.first == 0 {
			out.first, out.lowest = out.bound, out.bound
		}
		out.lowest = min(out.lowest, out.bound)
		if done(s) || time.Now().After(end) {
			return out
		}
	}
}

// A probe read that waits past its timeout (here behind another session's LOCK TABLES ... WRITE,
// in CI behind a keyless table's writers) is a slow read the pace learns from, not an error that
// ends the run before its copy; a probe that cannot read at all still is one.
func TestPaceTakesAReadHeldPastItsTimeoutAsSlow(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t VALUES (1, 0)")
	probe := func(table string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			var id int
			return db.QueryRowContext(ctx, "SELECT id FROM "+table+" ORDER BY id LIMIT 1").Scan(&id)
		}
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "LOCK TABLES t WRITE"); err != nil {
		t.Fatal(err)
	}
	held := minCheckTimeout + minCheckTimeout/2
	unlocked := make(chan error, 1)
	go func() {
		time.Sleep(held)
		_, err := conn.ExecContext(context.Background(), "UNLOCK TABLES")
		unlocked <- err
	}()
	g := NewGentle(db, GentleConfig{Interval: testInterval, Probe: probe("t")})
	at := time.Now()
	err = g.Start(context.Background())
	took := time.Since(at)
	if uerr := <-unlocked; uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil {
		t.Fatalf("with t locked for %s, the pace did not start: %v", held, err)
	}
	g.Stop()
	if took < minCheckTimeout {
		t.Fatalf("Start took %s: its first read did not wait for the lock, the test shows nothing", took)
	}
	_, latest, _, _ := g.reads.take()
	t.Logf("Start took %s with t locked for %s; the latest read took %s", took.Round(time.Millisecond), held, latest)

	if err := NewGentle(db, GentleConfig{Interval: testInterval, Probe: probe("missing")}).Start(context.Background()); err == nil ||
		!strings.Contains(err.Error(), "probe read") {
		t.Fatalf("a probe of a missing table: Start returned %v, want its read's error", err)
	}
}
