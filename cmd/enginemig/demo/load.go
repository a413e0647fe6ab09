package demo

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/internal/db/dbconn"
)

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// appMix is what the demo's application runs: the production mix the benchmark measures.
var appMix = bench.WebMix()

// LoadConfig shapes the application load.
type LoadConfig struct {
	Schema string
	Table  string
	// Rows is how many rows the seed created (ids 1..Rows).
	Rows int64
	// Threads each own the ids ≡ thread (mod Threads) plus the rows they insert, so the final
	// value of every row is known to exactly one thread.
	Threads int
	// Rate is the total target queries/s (0: as fast as possible). A real application has think
	// time; an unpaced load on 2 cores would starve the migration it is meant to observe.
	Rate int
}

// Load is a running application: it counts queries and errors, measures the longest stall, and
// records the last acknowledged value of every row it wrote.
type Load struct {
	cfg     LoadConfig
	db      *sql.DB
	workers []*worker
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started time.Time

	// stopping ends the workers between queries: cancelling in-flight queries would leave
	// writes whose outcome nobody knows.
	stopping atomic.Bool
	queries  atomic.Int64
	errors   atomic.Int64
	// recent is the queries/s of the last second (float64 bits), for live display.
	recent atomic.Uint64
	// maxStall is the longest single query in nanoseconds, and when it ended.
	maxStall   atomic.Int64
	maxStallAt atomic.Int64
	firstErr   atomic.Pointer[string]
}

// worker is one application thread; its fields are touched only by its goroutine until Stop.
type worker struct {
	l     *Load
	n     int
	rng   *rand.Rand
	coins map[int64]int64 // last acknowledged coins of rows this worker wrote
	mine  []int64         // ids this worker inserted
	// unsure are rows whose last write failed: the server may or may not have applied it.
	unsure map[int64]bool
	acked  int64
	stale  int64
	missed int64
	// unsureInserts failed or were interrupted: each may have added a row nobody knows the id of.
	unsureInserts int64
}

// StartLoad opens its own pool and starts cfg.Threads workers until Stop.
func StartLoad(ctx context.Context, conn dbconn.Config, cfg LoadConfig) (*Load, error) {
	db, err := dbconn.OpenApplication(ctx, conn, cfg.Schema, cfg.Threads)
	if err != nil {
		return nil, fmt.Errorf("application load: %w", err)
	}
	db.SetMaxIdleConns(cfg.Threads)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Load{cfg: cfg, db: db, cancel: cancel, started: time.Now()}
	for i := 0; i < cfg.Threads; i++ {
		w := &worker{l: l, n: i, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i))),
			coins: map[int64]int64{}, unsure: map[int64]bool{}}
		l.workers = append(l.workers, w)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			// Connect before timing starts: opening a connection is not a stall the table caused.
			w.l.db.ExecContext(runCtx, "SELECT 1")
			w.run(runCtx)
		}()
	}
	// Stop also when the caller's context ends (interrupt), so no goroutine outlives the demo.
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-runCtx.Done():
		}
	}()
	go l.sampleRate(runCtx)
	return l, nil
}

// LoadStats is a snapshot of the application's view.
type LoadStats struct {
	Queries   int64         `json:"queries"`
	Errors    int64         `json:"errors"`
	FirstErr  string        `json:"first_error,omitempty"`
	MaxStall  time.Duration `json:"longest_stall_ns"`
	MaxAt     time.Time     `json:"longest_stall_at"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	QPS       float64       `json:"queries_per_second"`
	StaleRead int64         `json:"stale_reads"`
}

// Stats is safe to call while the load runs.
func (l *Load) Stats() LoadStats {
	s := LoadStats{Queries: l.queries.Load(), Errors: l.errors.Load(), MaxStall: time.Duration(l.maxStall.Load()),
		Elapsed: time.Since(l.started)}
	if at := l.maxStallAt.Load(); at != 0 {
		s.MaxAt = time.Unix(0, at)
	}
	if p := l.firstErr.Load(); p != nil {
		s.FirstErr = *p
	}
	s.QPS = float64(s.Queries) / max(s.Elapsed.Seconds(), 0.001)
	return s
}

func (l *Load) sampleRate(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, at := l.queries.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			n := l.queries.Load()
			l.recent.Store(math.Float64bits(float64(n-last) / now.Sub(at).Seconds()))
			last, at = n, now
		}
	}
}

// RecentQPS is the application's queries/s over the last second.
func (l *Load) RecentQPS() float64 { return math.Float64frombits(l.recent.Load()) }

// Stop ends the load, waits for every in-flight query to finish and closes the pool.
func (l *Load) Stop() LoadStats {
	l.stopping.Store(true)
	l.wg.Wait()
	l.cancel()
	l.db.Close()
	s := l.Stats()
	for _, w := range l.workers {
		s.StaleRead += w.stale
	}
	return s
}

func (l *Load) fail(err error) {
	l.errors.Add(1)
	msg := err.Error()
	l.firstErr.CompareAndSwap(nil, &msg)
}

func (l *Load) observe(d time.Duration) {
	l.queries.Add(1)
	for {
		old := l.maxStall.Load()
		if int64(d) <= old {
			return
		}
		if l.maxStall.CompareAndSwap(old, int64(d)) {
			l.maxStallAt.Store(time.Now().UnixNano())
			return
		}
	}
}

func (w *worker) run(ctx context.Context) {
	var interval time.Duration
	if w.l.cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(w.l.cfg.Threads) / float64(w.l.cfg.Rate))
	}
	next := time.Now()
	for ctx.Err() == nil && !w.l.stopping.Load() {
		if interval > 0 {
			next = next.Add(interval)
			if wait := time.Until(next); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			} else if -wait > time.Second {
				// After a stall, do not burst to catch up: a real application's users gave up.
				next = time.Now()
			}
		}
		w.step(ctx)
	}
}

// pick returns a random id this worker owns: a seeded row or one it inserted.
func (w *worker) pick() int64 {
	T := int64(w.l.cfg.Threads)
	seeded := (w.l.cfg.Rows - int64(w.n) + T - 1) / T // ids n+1, n+1+T, ... <= Rows
	total := seeded + int64(len(w.mine))
	if total <= 0 {
		return 0
	}
	i := w.rng.Int64N(total)
	if i < seeded {
		return int64(w.n) + 1 + i*T
	}
	return w.mine[i-seeded]
}

// expected is the coins value the table must hold for id, and whether it is known.
func (w *worker) expected(id int64) (int64, bool) {
	if w.unsure[id] {
		return 0, false
	}
	if c, ok := w.coins[id]; ok {
		return c, true
	}
	if id <= w.l.cfg.Rows {
		return seedCoins(id), true
	}
	return 0, false
}

func (w *worker) step(ctx context.Context) {
	table := dbconn.QualifiedName(w.l.cfg.Schema, w.l.cfg.Table)
	op := appMix.Draw(w.rng)
	start := time.Now()
	switch op {
	case bench.OpSelect:
		id := w.pick()
		var coins int64
		err := w.l.db.QueryRowContext(ctx, "SELECT coins FROM "+table+" WHERE id = ?", id).Scan(&coins)
		if w.done(ctx, start, err) {
			return
		}
		if want, ok := w.expected(id); ok && coins != want {
			w.stale++
		}
	case bench.OpUpdate:
		id := w.pick()
		want, known := w.expected(id)
		// A new value always differs from the old one, so a 0 rows-affected answer means the row
		// is gone rather than unchanged.
		next := (want + 1 + w.rng.Int64N(1000)) % 1000000
		res, err := w.l.db.ExecContext(ctx, "UPDATE "+table+" SET coins = ?, fed_at = NOW() WHERE id = ?", next, id)
		if err == nil {
			var n int64
			if n, err = res.RowsAffected(); err == nil && n != 1 && known {
				err = fmt.Errorf("UPDATE of id %d changed %d rows, want 1 (row missing?)", id, n)
				w.missed++
			}
		}
		if w.done(ctx, start, err) {
			w.unsure[id] = true
			return
		}
		w.coins[id], w.acked = next, w.acked+1
		delete(w.unsure, id)
	case bench.OpInsert:
		coins := w.rng.Int64N(100000)
		res, err := w.l.db.ExecContext(ctx, "INSERT INTO "+table+" (player_id, name, breed, speed, stamina, coins, fed_at) VALUES (?, ?, ?, ?, ?, ?, NOW())",
			1+w.rng.Int64N(max(w.l.cfg.Rows/3, 1)), fmt.Sprintf("foal-%d-%d", w.n, len(w.mine)), w.rng.IntN(12), 40+w.rng.IntN(60), 50+w.rng.IntN(50), coins)
		var id int64
		if err == nil {
			id, err = res.LastInsertId()
		}
		if w.done(ctx, start, err) {
			w.unsureInserts++
			return
		}
		w.mine = append(w.mine, id)
		w.coins[id], w.acked = coins, w.acked+1
	}
}

// done records a query's outcome; true means it failed. A query cut short by Stop is not an
// application error: the demo ended it, not the server.
func (w *worker) done(ctx context.Context, start time.Time, err error) bool {
	if err != nil && ctx.Err() != nil {
		return true
	}
	w.l.observe(time.Since(start))
	if err != nil {
		w.l.fail(err)
		return true
	}
	return false
}
