package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Gentle paces the copy and verification by the application's own signals, measured every
// GentleConfig.Interval:
//
//   - its latency: a primary-key read of the table being converted, as the application reads it
//     (it queues behind the copy's table lock and for a core like the application's reads do),
//     timed every ProbeEvery: the latest read against its usual time, and the p99 of the last
//     second's reads against the latency target (latency.go), which bounds a chunk's lock;
//   - the sessions it keeps running: Threads_running, which counts sessions waiting for a lock or
//     for a core;
//   - its throughput: the server's SELECT, INSERT and UPDATE statements per second (enginemig's own
//     writes are REPLACE, DELETE and INSERT ... SELECT), which is what the application loses, and
//     says whether there is an application at all.
//
// From them it keeps a level between 0 and gentleTop: the top (two copy workers, no rest, and
// verification beside the index build) only while the application leaves room, one worker and
// rests growing to 32 times each chunk's lock below it. Any signal out of bounds drops two
// levels at once, so a slowdown is answered within two or three measurements; levels come back
// one at a time after half a second of calm. A server whose application is idle gets the top.
// The explicit limits of Throttler (Threads_running, replica lag, pause) still stop the copy
// outright; Gentle only sets the pace while they allow it.
type Gentle struct {
	db    *sql.DB
	cfg   GentleConfig
	reads *prober

	locksMu sync.Mutex
	locks   []lockSpan // the chunks' locks (Held), the last second's

	mu  sync.Mutex
	gov governor
	// rates: the application's statements a second before the copy (the learned rate) and the
	// sum and count of the measurements since, for the run's summary (LatencySummary).
	rateBefore, rateSum float64
	rates               int

	cancel context.CancelFunc
	done   chan struct{}
}

// GentleConfig tunes Gentle. Probe is required.
type GentleConfig struct {
	// Probe reads the table as the application does (a primary-key read); its duration is the
	// application's latency.
	Probe func(ctx context.Context) error
	// Interval between measurements (default 100 ms).
	Interval time.Duration
	// ProbeEvery is how often the probe is timed (default 10 ms: a second holds the hundred reads
	// a p99 needs).
	ProbeEvery time.Duration
	// LatencyFactor is the latency target as a factor of the probe's p99 before the copy
	// (default DefaultLatencyFactor; negative turns the target off).
	LatencyFactor float64
	// IdleRate: below this many application statements a second, and fewer than IdleWrites
	// INSERTs and UPDATEs, the server counts as idle (defaults 1000 and 10). enginemig's own reads
	// (verification's, the chunks' bounds) are SELECTs too; its writes are not INSERT or UPDATE.
	IdleRate   float64
	IdleWrites float64
	Logger     *slog.Logger // level changes at Debug, back-offs at Info; nil discards
}

// gentleTop is the level of full speed; restRatios are the rests (times a chunk's lock) of the
// levels below it. Level gentleTop-1 rests nothing but copies one chunk at a time. A busy
// application's copy starts at busyStart, resting as long as each chunk held the source; the
// rests longer than eight times a chunk's lock are for an application near its capacity, which
// loses throughput to a copy resting eight times its locks (its requests have little slack left
// for a stall or a core).
var restRatios = [...]float64{32, 16, 8, 4, 2, 1, 0.5, 0.25, 0}

const (
	gentleTop = len(restRatios)
	busyStart = 5
)

// NewGentle prepares the pacing; Start begins the measurements on db.
func NewGentle(db *sql.DB, cfg GentleConfig) *Gentle {
	if cfg.Interval <= 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.IdleRate <= 0 {
		cfg.IdleRate = 1000
	}
	if cfg.IdleWrites <= 0 {
		cfg.IdleWrites = 10
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = 10 * time.Millisecond
	}
	if cfg.LatencyFactor == 0 {
		cfg.LatencyFactor = DefaultLatencyFactor
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gentle{db: db, cfg: cfg, reads: newProber(cfg.Probe, cfg.ProbeEvery), gov: governor{level: gentleTop}}
}

// Start measures the application before anything of the copy runs (its baselines): five
// intervals, two when it is idle, and while it is busy until baselineReads probe reads were timed
// (at most three seconds). Then it keeps measuring in the background until Stop or until ctx
// ends.
func (g *Gentle) Start(ctx context.Context) error {
	if g.cfg.Probe == nil {
		return errors.New("throttle: Gentle needs a probe")
	}
	ctx, cancel := context.WithCancel(ctx)
	g.reads.read(ctx) // the first read, for the first measurement
	probing := make(chan struct{})
	go func() { defer close(probing); g.reads.run(ctx) }()
	learn, prev, err := g.learn(ctx)
	if err != nil {
		cancel()
		<-probing
		return fmt.Errorf("throttle: measure the application: %w", err)
	}
	g.mu.Lock()
	g.gov = newGovernor(learn, idleness{g.cfg.IdleRate, g.cfg.IdleWrites}, g.cfg.LatencyFactor)
	g.rateBefore = g.gov.base.rate
	st := g.stateLocked()
	g.mu.Unlock()
	g.reads.record()
	g.cfg.Logger.Info("pacing by the application", "level", st.Level, "statements_per_second", int(g.gov.base.rate),
		"probe", g.gov.base.probe.Round(10*time.Microsecond), "threads_running", g.gov.base.running,
		"latency_p99", seconds(st.LatencyBaseline), "latency_target", seconds(st.LatencyTarget), "latency_source", st.LatencySource)
	g.cancel, g.done = cancel, make(chan struct{})
	go func() {
		defer close(g.done)
		g.loop(ctx, prev)
		<-probing
	}()
	return nil
}

// learn takes the measurements before the copy (Start).
func (g *Gentle) learn(ctx context.Context) ([]signals, signals, error) {
	var learn []signals
	prev, err := g.measure(ctx, signals{})
	if err != nil {
		return nil, prev, err
	}
	deadline, reads := time.Now().Add(3*time.Second), 0
	for i := 0; !(i >= 2 && g.idle(learn)) && (i < 5 || reads < baselineReads && time.Now().Before(deadline)); i++ {
		if err := Sleep(ctx, g.cfg.Interval); err != nil {
			return nil, prev, err
		}
		s, err := g.measure(ctx, prev)
		if err != nil {
			return nil, prev, err
		}
		learn, prev, reads = append(learn, s), s, reads+len(s.reads)
	}
	return learn, prev, nil
}

// idle reports whether the measurements so far saw an idle application.
func (g *Gentle) idle(learn []signals) bool {
	for _, s := range learn {
		if !(idleness{g.cfg.IdleRate, g.cfg.IdleWrites}).of(s) {
			return false
		}
	}
	return true
}

func (g *Gentle) loop(ctx context.Context, prev signals) {
	tick := time.NewTicker(g.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s, err := g.measure(ctx, prev)
		if ctx.Err() != nil {
			return
		}
		g.mu.Lock()
		before, limited := g.gov.level, g.gov.lat.limiting
		if err != nil {
			g.gov.pressed("cannot measure the application: " + err.Error())
		} else {
			g.gov.step(s)
			g.rateSum, g.rates = g.rateSum+s.rate, g.rates+1
			prev = s
		}
		after, why, st := g.gov.level, g.gov.why, g.stateLocked()
		limits := g.gov.lat.limiting
		g.mu.Unlock()
		if after < before {
			g.cfg.Logger.Info("copy backs off: the application needs the server", "level", after, "reason", why)
		} else if after != before {
			g.cfg.Logger.Debug("copy speeds up: the application leaves room", "level", after)
		}
		if limits && !limited {
			g.cfg.Logger.Info("copy shortens its chunks: the application's latency is over its target", "reason", "latency",
				"latency_p99", seconds(st.LatencyP99), "latency_target", seconds(st.LatencyTarget), "chunk_lock_bound", seconds(st.ChunkLockBound))
		} else if limited && !limits {
			g.cfg.Logger.Debug("the latency target no longer bounds the chunks", "latency_p99", seconds(st.LatencyP99))
		}
	}
}

// seconds turns a status figure back into a duration for the log.
func seconds(f float64) time.Duration {
	return time.Duration(f * float64(time.Second)).Round(10 * time.Microsecond)
}

// Stop ends the measurements; the pace stays where it was.
func (g *Gentle) Stop() {
	if g.cancel != nil {
		g.cancel()
		<-g.done
	}
}

// RestRatio is how long the copy or verification pauses after a chunk, in multiples of the time
// the chunk held the source.
func (g *Gentle) RestRatio() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gov.level >= len(restRatios) {
		return 0
	}
	return restRatios[g.gov.level]
}

// Workers is how many copy chunks may be in flight, at most limit: limit only at the top level.
func (g *Gentle) Workers(limit int) int {
	if g.Room() {
		return limit
	}
	return 1
}

// Room reports whether the application leaves room for extra work beside the current stage
// (a second copy worker, verification beside the index build).
func (g *Gentle) Room() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gov.level >= gentleTop
}

// Held is told of each time a chunk of the copy or verification held the source (the latency
// target tells the reads that waited for a chunk by it).
func (g *Gentle) Held(from, to time.Time) {
	g.locksMu.Lock()
	defer g.locksMu.Unlock()
	g.locks = append(g.locks, lockSpan{from, to})
}

// recentLocks returns the locks that ended in the last second and forgets older ones.
func (g *Gentle) recentLocks(now time.Time) []lockSpan {
	g.locksMu.Lock()
	defer g.locksMu.Unlock()
	i := 0
	for i < len(g.locks) && now.Sub(g.locks[i].to) > time.Second {
		i++
	}
	g.locks = append(g.locks[:0], g.locks[i:]...)
	return append([]lockSpan(nil), g.locks...)
}

// LockBound is the longest a chunk may hold the source now, by the latency target (latency.go);
// 0: no bound.
func (g *Gentle) LockBound() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gov.lat.bound
}

// GentleState is what Gentle last decided and why.
type GentleState struct {
	Level  int    `json:"level"`
	Top    int    `json:"top"`
	Reason string `json:"reason,omitempty"` // the last back-off's cause
	// LatencySource says what the latency figures time: "probe", a primary-key read of the table.
	LatencySource string `json:"latency_source"`
	// LatencyBaseline is the probe's p99 before the copy, LatencyTarget the most its p99 may be
	// (0: no target, --latency-target 0), LatencyP99 its p99 over the last second's reads.
	LatencyBaseline float64 `json:"latency_baseline_seconds"`
	LatencyTarget   float64 `json:"latency_target_seconds"`
	LatencyP99      float64 `json:"latency_p99_seconds"`
	// ChunkLockBound is the longest a chunk may hold the table by the target (0: none).
	ChunkLockBound float64 `json:"chunk_lock_bound_seconds"`
}

// State is the current level, the last back-off's reason and the latency target's figures.
func (g *Gentle) State() GentleState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stateLocked()
}

func (g *Gentle) stateLocked() GentleState {
	l := &g.gov.lat
	return GentleState{Level: g.gov.level, Top: gentleTop, Reason: g.gov.why, LatencySource: "probe",
		LatencyBaseline: l.base.Seconds(), LatencyTarget: l.target.Seconds(), LatencyP99: l.p99().Seconds(), ChunkLockBound: l.bound.Seconds()}
}

// LatencySummary is the latency target's account of a whole run, for apply's result.
type LatencySummary struct {
	Source   string  `json:"latency_source"`
	Baseline float64 `json:"latency_baseline_seconds"`
	Target   float64 `json:"latency_target_seconds"`
	// P99 is the probe's p99 from the copy's start to now, over Reads reads.
	P99   float64 `json:"latency_p99_seconds"`
	Reads int64   `json:"latency_reads"`
	// The application's statements a second (SELECT, INSERT, UPDATE; the probe's reads left
	// out) before the copy and, on average, since: the share of its throughput the run kept.
	RateBefore float64 `json:"app_statements_per_second_before"`
	RateDuring float64 `json:"app_statements_per_second_during"`
}

// Summary is the latency figures of the run so far.
func (g *Gentle) Summary() LatencySummary {
	p99, n := g.reads.p99()
	g.mu.Lock()
	defer g.mu.Unlock()
	during := 0.0
	if g.rates > 0 {
		during = g.rateSum / float64(g.rates)
	}
	return LatencySummary{Source: "probe", Baseline: g.gov.lat.base.Seconds(), Target: g.gov.lat.target.Seconds(), P99: p99.Seconds(), Reads: n,
		RateBefore: g.rateBefore, RateDuring: during}
}

// measure takes one sample: the status counters and the probe's reads since the last one.
func (g *Gentle) measure(ctx context.Context, prev signals) (signals, error) {
	ctx, cancel := context.WithTimeout(ctx, minCheckTimeout)
	defer cancel()
	rows, err := g.db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Threads_running', 'Com_select', 'Com_insert', 'Com_update')")
	if err != nil {
		return signals{}, err
	}
	s := signals{at: time.Now()}
	for rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			rows.Close()
			return signals{}, err
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch name {
		case "Threads_running":
			s.running = float64(n)
		case "Com_select":
			s.statements += n
		default:
			s.statements, s.writes = s.statements+n, s.writes+n
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return signals{}, err
	}
	reads, latest, probes, err := g.reads.take()
	if err != nil {
		return signals{}, err
	}
	s.reads, s.probe, s.locks = reads, latest, g.recentLocks(s.at)
	s.statements -= probes // the probe's reads are SELECTs too, and slow ones come fewer a second
	if !prev.at.IsZero() && s.at.After(prev.at) {
		secs := s.at.Sub(prev.at).Seconds()
		s.rate, s.writeRate = float64(s.statements-prev.statements)/secs, float64(s.writes-prev.writes)/secs
	}
	return s, nil
}

// Sleep waits d (nothing when d <= 0) or until ctx ends: the pace's samples, the copy's and
// verification's rests, and the pauses of tests' fault injection.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
