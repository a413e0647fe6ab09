package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/internal/db/outcome"
)

func init() { register(benchCommand) }

// multiFlag collects a repeatable flag's values verbatim. cli's StringSliceFlag splits on commas,
// which would cut SQL such as 'SELECT a, b FROM t' apart.
type multiFlag struct{ values []string }

func (m *multiFlag) Set(v string) error { m.values = append(m.values, v); return nil }
func (m *multiFlag) String() string     { return strings.Join(m.values, "; ") }

func benchCommand() *cli.Command {
	const cat = "Benchmark"
	flags := append(connectionFlags(),
		&cli.StringFlag{Name: "database", Aliases: []string{"D", "d"}, Usage: "database (schema) of the table (required)", Category: cat},
		&cli.StringFlag{Name: "table", Aliases: []string{"t"}, Usage: "table to benchmark (required)", Category: cat},
		&cli.StringFlag{Name: "compare", Usage: "second table in the same database to run side by side (with --read-only or --on-live-table; user statements naming --table are rewritten to it)", Category: cat},
		&cli.StringFlag{Name: "mix", Value: "16:7:1", Usage: "SELECT:UPDATE:INSERT[:DELETE] primary-key weights; auto: the application's statements (digests); io: weights from row-operation counts; or a --save-mix FILE", Category: cat},
		&cli.DurationFlag{Name: "observe", Usage: "with --mix auto: capture the statements run during this window (e.g. 60s), not the digests' totals, and find reports clients loop (replayed as loops)", Category: cat},
		&cli.StringFlag{Name: "from-log", Usage: "replay the statements on the table found in this slow query log (best with long_query_time=0) or general query log, instead of digests", Category: cat},
		&cli.StringFlag{Name: "save-mix", Usage: "write the captured mix to FILE (JSON), to replay it elsewhere with --mix FILE", Category: cat},
		&cli.Int64Flag{Name: "report-rows", Usage: "with --observe: reads examining at least this many rows a run replay as background clients at production's concurrency (0: only those seen looping)", Category: cat},
		&cli.GenericFlag{Name: "query", Value: &multiFlag{}, Usage: "'weight:SQL' statement added to the mix; name the table as {table} or after FROM/JOIN/UPDATE/INTO; each ? gets a key k, k+100, ... (repeatable)", Category: cat},
		&cli.GenericFlag{Name: "background", Value: &multiFlag{}, Usage: "report statement looped by one extra client during every step, e.g. 'SELECT SUM(coins) FROM t' (repeatable)", Category: cat},
		&cli.StringFlag{Name: "threads", Value: "1,4,16,64", Usage: "comma-separated thread counts of the sweep", Category: cat},
		&cli.DurationFlag{Name: "duration", Value: bench.DefaultDuration, Usage: "measured time per step and per side", Category: cat},
		&cli.DurationFlag{Name: "warmup", Value: bench.DefaultWarmup, Usage: "unmeasured time before each step", Category: cat},
		&cli.IntFlag{Name: "sample-rows", Value: bench.DefaultSampleRows, Usage: "rows copied (in key order, short chunks) into the MyISAM and InnoDB scratch tables", Category: cat},
		&cli.StringFlag{Name: "scratch-database", Value: bench.DefaultScratchDB, Usage: "database for the scratch copies; its tables are dropped afterwards, the database too if this run created it", Category: cat},
		&cli.BoolFlag{Name: "read-only", Usage: "SELECT probes on the named table(s) instead of scratch copies: safe on production", Category: cat},
		&cli.BoolFlag{Name: "on-live-table", Usage: "run the write mix directly on the named table(s): staging only, the rows are changed", Category: cat},
		&cli.BoolFlag{Name: "skip-binlog", Usage: "SET sql_log_bin=0 for the benchmark sessions so scratch writes do not replicate (needs the privilege; writes get cheaper than in production)", Category: cat},
		&cli.Uint64Flag{Name: "seed", Usage: "random seed for the key sequence (default: time)", Category: cat},
		&cli.BoolFlag{Name: "gate", Usage: "judge the second side against the first with the thresholds below and exit 5 when it fails", Category: cat},
		&cli.Float64Flag{Name: "gate-min-qps-ratio", Value: bench.DefaultMinQPSRatio, Usage: "with --gate: minimum throughput of the second side relative to the first", Category: cat},
		&cli.Float64Flag{Name: "gate-max-p99-ratio", Value: bench.DefaultMaxP99Ratio, Usage: "with --gate: maximum p99 latency of the second side relative to the first", Category: cat},
		&cli.StringFlag{Name: "chart", Usage: "write a chart (queries/s and p99 vs threads, one line per side) to FILE: .html (self-contained, opens offline), .svg or .png", Category: cat},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "report format: text or json", Category: cat},
	)
	return &cli.Command{
		Name:  "bench",
		Usage: "benchmark a table with the production query mix, MyISAM vs InnoDB, over a thread sweep",
		Description: "By default copies a sample of the table into MyISAM and InnoDB scratch tables and runs the mix\n" +
			"(16 SELECT : 7 UPDATE : 1 INSERT by primary key) on both, interleaved, at each thread count. The live\n" +
			"table is only read. --mix auto (or --from-log FILE) replays the statements the application runs on\n" +
			"the table instead, weighted as in production. See docs/bench.md.",
		Flags:  flags,
		Action: runBench,
	}
}

// benchOutput is the JSON document: the report, plus the verdict when --gate is given.
type benchOutput struct {
	bench.Report
	Gate *bench.GateResult `json:"gate,omitempty"`
}

func runBench(c *cli.Context) error {
	if err := requireFlags(c, "database", "table"); err != nil {
		return err
	}
	opts, err := benchOptions(c)
	if err != nil {
		return outcome.New(outcome.Usage, err, "see enginemig bench --help")
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return outcome.Errorf(outcome.Usage, "--output %q: want text or json", format)
	}
	maxThreads := 0
	for _, n := range opts.Threads {
		maxThreads = max(maxThreads, n)
	}
	db, _, err := openDB(c.Context, c, "", maxThreads+len(opts.Background)+2)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := resolveMix(c, db, &opts); err != nil {
		return err
	}
	// Captured reports replayed by background clients need connections of their own.
	db.SetMaxOpenConns(maxThreads + len(opts.Background) + 2 + bench.LoopClients(opts.Config))
	opts.Progress = func(line string) { fmt.Fprintln(os.Stderr, "bench:", line) }
	opts.Logger = loggerOf(c)
	rep, err := bench.Run(c.Context, db, opts)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	out := benchOutput{Report: rep}
	if c.Bool("gate") {
		if len(rep.Results) != 2 {
			return outcome.Errorf(outcome.Usage, "--gate needs two sides (scratch mode, or --compare)")
		}
		th := bench.Thresholds{MinQPSRatio: c.Float64("gate-min-qps-ratio"), MaxP99Ratio: c.Float64("gate-max-p99-ratio")}
		g := th.Judge(rep.Results[0], rep.Results[1])
		g.Gate = "bench"
		out.Gate = &g
	}
	if path := c.String("chart"); path != "" {
		if err := bench.WriteChart(path, rep); err != nil {
			return err
		}
		loggerOf(c).Info("bench: chart written", slog.String("path", path))
	}
	if format == "json" {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		if err := rep.WriteText(c.App.Writer); err != nil {
			return err
		}
		if out.Gate != nil {
			fmt.Fprintln(c.App.Writer)
			fmt.Fprint(c.App.Writer, out.Gate.String())
		}
	}
	if out.Gate != nil && !out.Gate.Pass {
		return outcome.Errorf(outcome.GateFailed, "gate failed: %s", strings.Join(out.Gate.Reasons, "; "))
	}
	return nil
}

// benchOptions turns flags into bench.Options, rejecting contradictions before connecting.
func benchOptions(c *cli.Context) (bench.Options, error) {
	o := bench.Options{Mode: bench.ModeScratch, Schema: c.String("database"), Table: c.String("table"), Compare: c.String("compare"),
		SampleRows: c.Int("sample-rows"), ScratchDB: c.String("scratch-database")}
	switch {
	case c.Bool("read-only") && c.Bool("on-live-table"):
		return o, fmt.Errorf("--read-only and --on-live-table exclude each other")
	case c.Bool("read-only"):
		o.Mode = bench.ModeReadOnly
	case c.Bool("on-live-table"):
		o.Mode = bench.ModeLive
	}
	if o.Compare != "" && o.Mode == bench.ModeScratch {
		return o, fmt.Errorf("--compare needs --read-only or --on-live-table (scratch mode already compares MyISAM and InnoDB copies)")
	}
	threads, err := parseThreads(c.String("threads"))
	if err != nil {
		return o, err
	}
	o.Threads = threads
	o.Duration, o.Warmup = c.Duration("duration"), c.Duration("warmup")
	if o.Duration <= 0 {
		return o, fmt.Errorf("--duration must be positive")
	}
	if o.Warmup < 0 {
		return o, fmt.Errorf("--warmup must not be negative")
	}
	if o.SampleRows <= 0 {
		return o, fmt.Errorf("--sample-rows must be positive")
	}
	if err := mixOptions(c, &o); err != nil {
		return o, err
	}
	if o.Queries, err = bench.ParseQueries(c.Generic("query").(*multiFlag).values); err != nil {
		return o, err
	}
	if o.Background, err = bench.ParseBackground(c.Generic("background").(*multiFlag).values); err != nil {
		return o, err
	}
	o.ReadOnly = o.Mode == bench.ModeReadOnly
	o.SkipBinlog = c.Bool("skip-binlog")
	if o.ReportRows = c.Int64("report-rows"); o.ReportRows < 0 {
		return o, fmt.Errorf("--report-rows must not be negative")
	}
	o.Seed = c.Uint64("seed")
	return o, o.Config.Validate()
}

func parseThreads(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--threads %q: want comma-separated positive integers, e.g. 1,4,16,64", s)
		}
		out = append(out, n)
	}
	return out, nil
}
