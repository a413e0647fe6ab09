package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	capture "github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Target is one table to benchmark.
type Target struct {
	// Label names the side in reports: "MyISAM", "InnoDB", "before", a table name.
	Label  string `json:"label"`
	Schema string `json:"schema"`
	Table  string `json:"table"`
	// RefSchema and RefTable are the table that user statements are written against (the real
	// table when this target is a scratch copy or a shadow); empty means Schema and Table.
	RefSchema string `json:"-"`
	RefTable  string `json:"-"`
}

func (t Target) ref() (string, string) {
	if t.RefTable == "" {
		return t.Schema, t.Table
	}
	return t.RefSchema, t.RefTable
}

// Config is what to run at each step of a sweep.
type Config struct {
	// Threads is the sweep: one step per entry (default DefaultThreads).
	Threads []int
	// Duration is measured per step and per table, after Warmup.
	Duration time.Duration
	Warmup   time.Duration
	Mix      Mix
	// Queries are weighted user statements added to the mix; Background statements each loop
	// in one extra client alongside the threads (report scans).
	Queries    []Template
	Background []Template
	// Captured, when set, replays the statements the application ran on the table (see package
	// workload) instead of the built-in primary-key mix; Mix is then usually zero.
	Captured *capture.Capture `json:"-"`
	// ReportRows > 0 replays captured reads that examined at least this many rows per run in
	// production as background clients at production's concurrency (their total time over the
	// observation window: k clients, each running the statement duty = concurrency/k of the
	// time) instead of weighting them into the threads' mix. A report's rate is set by whoever
	// runs it (a cron job, a dashboard), not by the request threads; weighted, it would scale
	// with the sweep's thread count. Needs a capture with a window (--observe).
	ReportRows int64 `json:"-"`
	// ReadOnly refuses anything but SELECTs: what live tables get.
	ReadOnly bool
	// SkipBinlog sets sql_log_bin=0 on the benchmark's sessions (needs the privilege), so scratch
	// writes do not replicate. Off by default: the binlog is part of a write's real cost.
	SkipBinlog bool
	// Seed makes the key sequence reproducible.
	Seed uint64
	// Progress, when set, receives one line per finished step.
	Progress func(string)
}

// Defaults for a sweep.
var DefaultThreads = []int{1, 4, 16, 64}

const (
	DefaultDuration = 10 * time.Second
	DefaultWarmup   = 2 * time.Second
)

func (c *Config) fill() {
	if len(c.Threads) == 0 {
		c.Threads = DefaultThreads
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.Mix.Total() == 0 && len(c.Queries) == 0 && c.Captured == nil {
		c.Mix = DefaultMix()
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
}

// Validate rejects configurations that cannot run, before anything touches a server.
func (c Config) Validate() error {
	for _, n := range c.Threads {
		if n < 1 || n > 4096 {
			return fmt.Errorf("thread count %d: want 1..4096", n)
		}
	}
	if c.ReadOnly {
		if c.Mix.Writes() {
			return fmt.Errorf("mix %s writes, but this run is read-only (live tables only get SELECT probes; use scratch copies or --on-live-table on staging)", c.Mix)
		}
		for _, q := range append(append([]Template{}, c.Queries...), c.Background...) {
			if !q.ReadOnly() {
				return fmt.Errorf("%s %q is not a plain SELECT, but this run is read-only", q.Name, q.SQL)
			}
		}
	}
	return nil
}

// Result is one table's sweep.
type Result struct {
	Target
	Engine string `json:"engine"`
	Rows   int64  `json:"rows_estimate"`
	Mix    string `json:"mix"`
	Keys   string `json:"keys"`
	// Statements are the SQL each statement type ran, for the record.
	Statements []Template `json:"statements"`
	// Replay is the captured mix as replayed on this side (with --mix auto, --from-log, --mix FILE).
	Replay []ReplayStat `json:"replay,omitempty"`
	Steps  []Step       `json:"steps"`
}

// Step returns the step with n threads.
func (r Result) Step(threads int) (Step, bool) {
	for _, s := range r.Steps {
		if s.Threads == threads {
			return s, true
		}
	}
	return Step{}, false
}

// Sweep benchmarks the targets at each thread count. Targets are interleaved within each step,
// and their order alternates from step to step, so slow drift on the machine (another job, the
// page cache, a checkpoint) hits every side about equally instead of favouring the one run first.
func Sweep(ctx context.Context, db *sql.DB, targets []Target, cfg Config) ([]Result, error) {
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkPool(db, cfg); err != nil {
		return nil, err
	}
	loads := make([]*workload, len(targets))
	results := make([]Result, len(targets))
	for i, t := range targets {
		w, err := buildWorkload(ctx, db, t, cfg)
		if err != nil {
			return nil, err
		}
		loads[i] = w
		results[i] = Result{Target: t, Engine: w.info.Engine, Rows: w.info.Rows, Mix: mixName(cfg), Keys: describeKeys(w.keys), Replay: w.replay}
		for _, o := range append(append([]op{}, w.ops...), w.background...) {
			results[i].Statements = append(results[i].Statements, Template{Name: o.name, Weight: o.weight, SQL: o.sql})
		}
	}
	for si, n := range cfg.Threads {
		for k := range targets {
			i := k
			if si%2 == 1 {
				i = len(targets) - 1 - k
			}
			step, err := runStep(ctx, db, loads[i], stepSpec{threads: n, warmup: cfg.Warmup, duration: cfg.Duration,
				seed: cfg.Seed + uint64(si), skipBinlog: cfg.SkipBinlog})
			if err != nil {
				return results, fmt.Errorf("bench %s at %d threads: %w", dbconn.QualifiedName(targets[i].Schema, targets[i].Table), n, err)
			}
			results[i].Steps = append(results[i].Steps, step)
			if cfg.Progress != nil {
				cfg.Progress(fmt.Sprintf("%-8s threads=%-3d qps=%-9.0f p99=%.2fms errors=%d",
					targets[i].Label, n, step.Total.QPS, step.Total.P99, step.Total.Errors))
			}
		}
	}
	return results, nil
}

// checkPool makes sure the pool can hold every benchmark connection at once (plus one for
// KILL QUERY); otherwise threads would queue in database/sql and the numbers would be the pool's.
func checkPool(db *sql.DB, cfg Config) error {
	need := 0
	for _, n := range cfg.Threads {
		if n > need {
			need = n
		}
	}
	need += len(cfg.Background) + LoopClients(cfg) + 1
	if max := db.Stats().MaxOpenConnections; max > 0 && max < need {
		return fmt.Errorf("the connection pool allows %d connections but the benchmark needs %d (threads + background + 1)", max, need)
	}
	return nil
}

// mixName is what reports call the mix: S:U:I, "captured", or both.
func mixName(cfg Config) string {
	switch {
	case cfg.Captured == nil:
		return cfg.Mix.String()
	case cfg.Mix.Total() > 0:
		return "captured + " + cfg.Mix.String()
	}
	return "captured"
}

func describeKeys(k keySource) string {
	if k == nil {
		return "no key (captured statements only)"
	}
	return k.describe()
}
