package bench

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	capture "github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Thresholds decide a gate: the candidate side must keep at least MinQPSRatio of the baseline's
// throughput and at most MaxP99Ratio of its p99 latency, at every compared thread count.
type Thresholds struct {
	MinQPSRatio float64 `json:"min_qps_ratio"`
	MaxP99Ratio float64 `json:"max_p99_ratio"`
	// P99SlackMs: a p99 increase smaller than this never fails a gate, because sub-millisecond
	// p99s on a busy machine move by more than 50% from run to run. 0 means DefaultP99SlackMs,
	// a negative value means no slack.
	P99SlackMs float64 `json:"p99_slack_ms"`
}

// Default thresholds: allow 10% less throughput (noise on a shared machine), 50% worse p99.
const (
	DefaultMinQPSRatio = 0.9
	DefaultMaxP99Ratio = 1.5
	DefaultP99SlackMs  = 1.0
)

// DefaultThresholds returns the defaults.
func DefaultThresholds() Thresholds {
	return Thresholds{MinQPSRatio: DefaultMinQPSRatio, MaxP99Ratio: DefaultMaxP99Ratio, P99SlackMs: DefaultP99SlackMs}
}

// withDefaults fills zero fields.
func (th Thresholds) withDefaults() Thresholds {
	if th.MinQPSRatio == 0 {
		th.MinQPSRatio = DefaultMinQPSRatio
	}
	if th.MaxP99Ratio == 0 {
		th.MaxP99Ratio = DefaultMaxP99Ratio
	}
	if th.P99SlackMs == 0 {
		th.P99SlackMs = DefaultP99SlackMs
	}
	return th
}

// GateStep is the judgement at one thread count.
type GateStep struct {
	Threads  int      `json:"threads"`
	Before   Stats    `json:"before"`
	After    Stats    `json:"after"`
	QPSRatio float64  `json:"qps_ratio"`
	P99Ratio float64  `json:"p99_ratio"`
	Pass     bool     `json:"pass"`
	Reasons  []string `json:"reasons,omitempty"`
}

// Verdict is the gate's outcome in a word, as logs and reports print it.
func (g GateResult) Verdict() string {
	if g.Pass {
		return "passed"
	}
	return "FAILED"
}

// GateResult is a gate's verdict with the side-by-side numbers it was based on.
type GateResult struct {
	// Gate is "before-copy", "before-cutover", "after-cutover" or "" for a bare Judge.
	Gate       string     `json:"gate"`
	Pass       bool       `json:"pass"`
	Thresholds Thresholds `json:"thresholds"`
	Mix        string     `json:"mix"`
	Steps      []GateStep `json:"steps"`
	// Reasons says why the gate failed (empty when it passed).
	Reasons []string `json:"reasons,omitempty"`
	Before  Result   `json:"before"`
	After   Result   `json:"after"`
}

// Judge compares after (the candidate: InnoDB, the shadow, the table after cut-over) against
// before (the baseline) at every thread count both measured. It fails when throughput drops below
// MinQPSRatio, p99 rises above MaxP99Ratio (by more than the slack), the candidate has errors the
// baseline did not have, or there is nothing to compare.
func (th Thresholds) Judge(before, after Result) GateResult {
	th = th.withDefaults()
	if before.Label == after.Label {
		// The after-cutover watch probes the same table twice.
		before.Label, after.Label = before.Label+" before", after.Label+" after"
	}
	g := GateResult{Thresholds: th, Mix: after.Mix, Before: before, After: after, Pass: true}
	for _, b := range before.Steps {
		a, ok := after.Step(b.Threads)
		if !ok {
			continue
		}
		s := GateStep{Threads: b.Threads, Before: b.Total, After: a.Total, Pass: true,
			QPSRatio: ratio(a.Total.QPS, b.Total.QPS), P99Ratio: ratio(a.Total.P99, b.Total.P99)}
		fail := func(format string, args ...any) {
			s.Pass = false
			s.Reasons = append(s.Reasons, fmt.Sprintf("%d threads: ", b.Threads)+fmt.Sprintf(format, args...))
		}
		if b.Total.Count == 0 || a.Total.Count == 0 {
			fail("no statement completed (%s %d, %s %d)", before.Label, b.Total.Count, after.Label, a.Total.Count)
		} else {
			if s.QPSRatio < th.MinQPSRatio {
				fail("%s throughput %.0f qps is %.2fx of %s's %.0f (minimum %.2fx)", after.Label, a.Total.QPS, s.QPSRatio, before.Label, b.Total.QPS, th.MinQPSRatio)
			}
			slack := max(th.P99SlackMs, 0)
			if s.P99Ratio > th.MaxP99Ratio && a.Total.P99-b.Total.P99 > slack {
				fail("%s p99 %.2f ms is %.2fx of %s's %.2f ms (maximum %.2fx)", after.Label, a.Total.P99, s.P99Ratio, before.Label, b.Total.P99, th.MaxP99Ratio)
			}
		}
		if a.Total.Errors > 0 && b.Total.Errors == 0 {
			fail("%s had %d errors, %s none", after.Label, a.Total.Errors, before.Label)
		}
		if !s.Pass {
			g.Pass = false
			g.Reasons = append(g.Reasons, s.Reasons...)
		}
		g.Steps = append(g.Steps, s)
	}
	if len(g.Steps) == 0 {
		g.Pass = false
		g.Reasons = append(g.Reasons, "no thread count was measured on both sides")
	}
	return g
}

// String is the side-by-side report a user reads when a gate stops a migration.
func (g GateResult) String() string {
	var b strings.Builder
	verdict := "PASS"
	if !g.Pass {
		verdict = "FAIL"
	}
	name := g.Gate
	if name == "" {
		name = "benchmark"
	}
	fmt.Fprintf(&b, "gate %s: %s — %s vs %s, mix %s; thresholds: qps ratio >= %.2f, p99 ratio <= %.2f\n",
		name, verdict, sideName(g.After), sideName(g.Before), g.Mix, g.Thresholds.MinQPSRatio, g.Thresholds.MaxP99Ratio)
	if rs := g.After.Replay; len(rs) > 0 {
		n := 0
		for _, r := range rs {
			if r.NotReplayed == "" {
				n++
			}
		}
		fmt.Fprintf(&b, "captured mix: %d of %d statement shapes replayed; the replayed statements cover %.0f%% of the table's statement time\n",
			n, len(rs), 100*coverage(rs))
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "threads\tside\tqps\tp50 ms\tp95 ms\tp99 ms\tmax ms\terrors\t")
	for _, s := range g.Steps {
		for _, side := range []struct {
			label string
			st    Stats
		}{{g.Before.Label, s.Before}, {g.After.Label, s.After}} {
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t\n", s.Threads, side.label, side.st.QPS, side.st.P50, side.st.P95, side.st.P99, side.st.Max, side.st.Errors)
		}
		mark := "ok"
		if !s.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(tw, "%d\tratio\t%.2fx\t\t\t%.2fx\t\t%s\t\n", s.Threads, s.QPSRatio, s.P99Ratio, mark)
	}
	tw.Flush()
	for _, r := range g.Reasons {
		b.WriteString("  " + r + "\n")
	}
	return b.String()
}

// GateConfig is how a gate benchmarks.
type GateConfig struct {
	// Threads is the concurrency to measure at (default DefaultGateThreads): the application's.
	Threads int
	// Duration per side (default DefaultGateDuration) after Warmup (default DefaultGateWarmup).
	Duration time.Duration
	Warmup   time.Duration
	// Mix is the sample gate's mix (zero: DefaultMix). Read-only gates always use SELECT probes.
	Mix Mix
	// Queries and Background are user statements (see Template). Read-only gates use only the
	// ones that are plain SELECTs.
	Queries    []Template
	Background []Template
	// Captured replays the statements the application ran on the table (workload.FromDigests,
	// workload.FromLog, workload.Load) instead of Mix. Read-only gates run on live tables, so they
	// replay only its short SELECTs (see LiveReadMaxRows), and fall back to primary-key SELECT
	// probes when it has none.
	Captured *capture.Capture
	// CaptureMix captures Captured for each gated table (apply --gate-mix); nil keeps Mix.
	CaptureMix *GateMix
	// SampleRows and ScratchDB shape the sample gate's copies (defaults DefaultSampleRows, DefaultScratchDB).
	SampleRows int
	ScratchDB  string
	SkipBinlog bool
	Thresholds Thresholds
	Seed       uint64
	// Logger is as in Options (nil discards).
	Logger *slog.Logger `json:"-"`
}

// Gate defaults: 16 threads is the concurrency where MyISAM's lock waits show on small machines.
const (
	DefaultGateThreads  = 16
	DefaultGateDuration = 5 * time.Second
	DefaultGateWarmup   = time.Second
)

func (c GateConfig) sweep(readOnly bool) Config {
	cfg := Config{Threads: []int{c.Threads}, Duration: c.Duration, Warmup: c.Warmup, Mix: c.Mix,
		Queries: c.Queries, Background: c.Background, Captured: c.Captured, SkipBinlog: c.SkipBinlog, Seed: c.Seed}
	if cfg.Threads[0] <= 0 {
		cfg.Threads[0] = DefaultGateThreads
	}
	if cfg.Duration <= 0 {
		cfg.Duration = DefaultGateDuration
	}
	if c.Warmup == 0 {
		cfg.Warmup = DefaultGateWarmup
	}
	if readOnly {
		cfg.ReadOnly = true
		cfg.Mix = ReadOnlyMix()
		if c.Captured != nil && c.Captured.HasReads(LiveReadMaxRows) {
			cfg.Mix = Mix{}
		} else {
			cfg.Captured = nil
		}
		cfg.Queries = readOnlyOnly(c.Queries)
		cfg.Background = readOnlyOnly(c.Background)
	} else if cfg.Mix.Total() == 0 && cfg.Captured == nil {
		cfg.Mix = DefaultMix()
	}
	return cfg
}

func readOnlyOnly(ts []Template) []Template {
	var out []Template
	for _, t := range ts {
		if t.ReadOnly() {
			out = append(out, t)
		}
	}
	return out
}

// SampleGate is the before-copy gate: it copies a sample of schema.table as MyISAM and as InnoDB
// into the scratch database, runs the mix on both at cfg.Threads, and passes when InnoDB meets the
// thresholds against MyISAM. The live table is only read; the copies are always dropped.
func SampleGate(ctx context.Context, db *sql.DB, schema, table string, cfg GateConfig) (res GateResult, err error) {
	if cfg, err = cfg.withCapture(ctx, db, schema, table); err != nil {
		return GateResult{}, fmt.Errorf("before-copy gate: %w", err)
	}
	sc, err := newScratchLogged(ctx, db, cfg.ScratchDB, schema, table, cfg.SampleRows, dbconn.Logger(cfg.Logger))
	if err != nil {
		return GateResult{}, fmt.Errorf("before-copy gate: %w", err)
	}
	defer sc.dropLogged(ctx, &err)
	results, err := Sweep(ctx, db, sc.Targets(schema, table), cfg.sweep(false))
	if err != nil {
		return GateResult{}, fmt.Errorf("before-copy gate: %w", err)
	}
	g := cfg.Thresholds.Judge(results[0], results[1])
	g.Gate = "before-copy"
	return g, nil
}

// CompareReadOnly is the before-cutover gate: read-only probes on tableA (the source, baseline)
// and tableB (the shadow, candidate), interleaved, at cfg.Threads.
func CompareReadOnly(ctx context.Context, db *sql.DB, schema, tableA, tableB string, cfg GateConfig) (GateResult, error) {
	cfg, err := cfg.withCapture(ctx, db, schema, tableA)
	if err != nil {
		return GateResult{}, fmt.Errorf("before-cutover gate: %w", err)
	}
	targets := []Target{
		{Label: tableA, Schema: schema, Table: tableA},
		{Label: tableB, Schema: schema, Table: tableB, RefSchema: schema, RefTable: tableA},
	}
	results, err := Sweep(ctx, db, targets, cfg.sweep(true))
	if err != nil {
		return GateResult{}, fmt.Errorf("before-cutover gate: %w", err)
	}
	g := cfg.Thresholds.Judge(results[0], results[1])
	g.Gate = "before-cutover"
	return g, nil
}

// ProbeReadOnly measures read-only probes on one table: the after-cutover watch takes one just
// before the swap and one after, and compares them with Thresholds.Judge(before, after).
func ProbeReadOnly(ctx context.Context, db *sql.DB, schema, table string, cfg GateConfig) (Result, error) {
	cfg, err := cfg.withCapture(ctx, db, schema, table)
	if err != nil {
		return Result{}, fmt.Errorf("probe %s.%s: %w", schema, table, err)
	}
	results, err := Sweep(ctx, db, []Target{{Label: table, Schema: schema, Table: table}}, cfg.sweep(true))
	if err != nil {
		return Result{}, fmt.Errorf("probe %s.%s: %w", schema, table, err)
	}
	return results[0], nil
}

// sideName is the label, with the engine when the label does not already say it.
func sideName(r Result) string {
	if r.Engine == "" || r.Engine == r.Label {
		return r.Label
	}
	return r.Label + " (" + r.Engine + ")"
}
