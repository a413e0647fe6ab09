package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/planrun"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/diskspace"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/pace/throttle"
)

func init() { register(applyCommand) }

func applyCommand() *cli.Command {
	def := cutover.DefaultConfig()
	return &cli.Command{
		Name:      "apply",
		Usage:     "convert a MyISAM table to InnoDB online (shadow copy, binlog replay, atomic cut-over)",
		UsageText: "enginemig apply --database DB --table T [--dry-run] [flags]\n   enginemig apply --plan plan.json [--dry-run] [flags]",
		Description: "Copies the table into an InnoDB shadow `_T_new` in short chunks while replaying concurrent\n" +
			"changes from the binlog, builds secondary indexes, then swaps the tables atomically. The original\n" +
			"is kept as `_T_old` (MyISAM) for rollback. --dry-run does everything but the swap and drops the shadow.",
		Flags: append(append(connectionFlags(),
			&cli.StringFlag{Name: "database", Aliases: []string{"D", "d"}, Usage: "database (schema) of the table"},
			&cli.StringFlag{Name: "table", Aliases: []string{"t"}, Usage: "table to convert"},
			&cli.StringFlag{Name: "plan", Usage: "plan file written by 'enginemig plan --out FILE': convert its tables in plan order, stopping at the first failure (tables with blockers are skipped and reported)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "do everything except the swap, then drop the shadow; reports how long the copy took"},
			&cli.DurationFlag{Name: "chunk-time", Value: migration.DefaultChunkTime, Usage: "target duration of one chunk's source read; MyISAM blocks writers for this long per chunk"},
			&cli.BoolFlag{Name: "skip-verify", Usage: "skip the chunk-by-chunk checksum comparison of source and shadow before the cut-over (on by default)"},
			captureFlag(),
			maxHoldFlag(),
			&cli.IntFlag{Name: "copy-workers", Usage: "chunks copied at once while no client waits for the table; 0 chooses: 2, or 1 where InnoDB would write them one by one anyway (AUTO_INCREMENT; docs/reference.md)"},
			&cli.BoolFlag{Name: "keep-keyless", Usage: "convert a table without a unique key as it is; by default its InnoDB table gets an invisible auto-increment primary key, " + table.RowIDColumn + " (MariaDB 10.3+, MySQL 8.0.23+)"},
			&cli.BoolFlag{Name: "client-side-copy", Usage: "copy by reading rows into enginemig and writing them back (holds the source lock only for reads, but is several times slower) instead of one REPLACE ... SELECT per chunk"},
			&cli.DurationFlag{Name: "cutover-lock-wait", Value: def.LockWait, Usage: "how long one cut-over attempt may wait for the table lock (the application's worst stall for a failed attempt)"},
			&cli.DurationFlag{Name: "cutover-catch-up", Value: def.CatchUp, Usage: "how long the table may stay locked while replay applies the last changes"},
			&cli.DurationFlag{Name: "cutover-timeout", Value: def.Timeout, Usage: "how long to keep retrying the cut-over (the shadow kept current meanwhile); then exit 8 with the shadow kept: the same apply goes straight to the cut-over"},
			&cli.IntFlag{Name: "cutover-attempts", Value: def.Attempts, Usage: "cut-over attempts before giving up as at --cutover-timeout (0: no limit but the timeout)"},
			&cli.DurationFlag{Name: "cutover-backoff", Value: def.Backoff, Usage: "pause after a failed cut-over attempt; doubles up to 8x"},
			&cli.DurationFlag{Name: "long-query", Value: def.LongQuery, Usage: "queries on the table running longer than this delay the cut-over (a lock queued behind them would block the application)"},
			&cli.DurationFlag{Name: "snapshot-wait", Value: def.SnapshotWait, Usage: "before the swap, wait for each transaction begun before the cut-over until it ends or has been open this long (an older snapshot would get error 1412 on the table; 0: no wait)"},
			&cli.DurationFlag{Name: "lock-timeout", Value: lockwait.DefaultTimeout, Usage: "how long a statement of apply may wait for another session's lock before apply stops with nothing changed (exit 6); the wait and its holder are logged"},
			&cli.DurationFlag{Name: "reconnect-for", Value: migration.DefaultReconnectFor, Usage: "how long apply keeps reconnecting, with backoff, after a lost connection (server restart, failover), resuming where it stopped; then exit 7 with the work kept for a re-run (0: do not reconnect)"},
			&cli.Float64Flag{Name: "latency-target", Value: throttle.DefaultLatencyFactor, Usage: "keep the application's p99 (a key read timed every 10 ms) during copy and verification under this many times its p99 before (never under 4 ms) by shortening chunks; 0: off", Category: "Throttling"},
			&cli.BoolFlag{Name: "fixed-pace", Usage: "do not pace the copy by the application's throughput, latency and running sessions: rest as long as each chunk held the table whenever another client waited (docs/runbook.md)", Category: "Throttling"},
			&cli.IntFlag{Name: "max-threads-running", Usage: "pause the copy while the server's Threads_running exceeds this (0: no limit)", Category: "Throttling"},
			&cli.StringSliceFlag{Name: "replica", Usage: "host:port of a replica whose lag must stay under --max-lag (same credentials; repeatable); lag is measured with a heartbeat enginemig writes, and lag that cannot be measured pauses the copy", Category: "Throttling"},
			&cli.DurationFlag{Name: "max-lag", Value: time.Second, Usage: "pause the copy while a --replica lags more than this", Category: "Throttling"},
			&cli.StringFlag{Name: "disk-reserve", DefaultText: "10% of the file system, at least 1 GiB", Usage: "free space kept on the server's datadir, binlog and tmpdir: under it the copy waits (throttle reason disk); a size (2G), a share (10%), or 0", Category: "Throttling"},
			&cli.DurationFlag{Name: "disk-pause-limit", Value: diskspace.DefaultPauseLimit, Usage: "how long free space may stay under --disk-reserve before apply gives up as --disk-give-up says", Category: "Throttling"},
			&cli.StringFlag{Name: "disk-give-up", Value: "drop", Usage: "what apply does when it gives up for want of disk space (the pause limit passed, or the disk filled): drop the shadow to give its space back (exit 6), or keep it for a resume (exit 7)", Category: "Throttling"},
			&cli.StringFlag{Name: "control-socket", Usage: "unix socket for live control while apply runs: 'enginemig control --socket PATH status|pause|resume|abort|release-cutover|chunk-time=20ms|max-lag=2s|max-threads-running=N'"},
			&cli.StringFlag{Name: "metrics-listen", Usage: "serve Prometheus metrics (stage, rows, rates, replay, throttle, replica lag) at http://ADDR/metrics, e.g. 127.0.0.1:9104"},
			&cli.StringFlag{Name: "postpone-cutover-file", Usage: "while this file exists after the copy, keep replaying and do not cut over; create it (touch) before starting, remove it to release"},
			&cli.DurationFlag{Name: "postpone-max", Usage: "release a postponed cut-over after this long even if the file still exists (0: wait for the file)"},
			&cli.StringFlag{Name: "gate", Usage: "benchmark gates to run: before-copy (a sample as MyISAM vs InnoDB), before-cutover (read-only probes, source vs shadow), after-cutover (probes before vs after the swap), comma-separated, or all", Category: "Gates"},
			&cli.Float64Flag{Name: "gate-min-qps-ratio", Value: bench.DefaultMinQPSRatio, Usage: "a gate fails when the candidate's queries/s fall below this share of the baseline's", Category: "Gates"},
			&cli.Float64Flag{Name: "gate-max-p99-ratio", Value: bench.DefaultMaxP99Ratio, Usage: "a gate fails when the candidate's p99 latency exceeds this multiple of the baseline's", Category: "Gates"},
			&cli.IntFlag{Name: "gate-threads", Value: bench.DefaultGateThreads, Usage: "client threads a gate benchmarks with (use the application's concurrency)", Category: "Gates"},
			&cli.DurationFlag{Name: "gate-duration", Value: bench.DefaultGateDuration, Usage: "measurement time per side of a gate", Category: "Gates"},
			&cli.IntFlag{Name: "gate-sample-rows", Value: bench.DefaultSampleRows, Usage: "rows copied into the before-copy gate's scratch tables", Category: "Gates"},
			&cli.StringFlag{Name: "gate-mix", Value: "16:7:1", Usage: "what the gates run: SELECT:UPDATE:INSERT[:DELETE] primary-key weights; auto: each table's own statements from performance_schema digests (since last reset); or a FILE written by bench --save-mix", Category: "Gates"},
			&cli.StringFlag{Name: "gate-from-log", Usage: "gates replay each table's statements found in this slow query log or general query log", Category: "Gates"},
			&cli.StringFlag{Name: "answers", Value: "auto", Usage: "first stop (exit 5) if an application read answers differently on InnoDB: auto (the statements the server's history keeps), off, or a FILE of statements (enginemig answers)", Category: "Gates"},
			&cli.StringFlag{Name: "answers-accept", Usage: "FILE of statement digests whose new answers are accepted (as enginemig answers prints them)", Category: "Gates"},
			&cli.Int64Flag{Name: "answers-rows", Value: answers.DefaultRows, Usage: "rows copied for the answers check (0: all)", Category: "Gates"},
			&cli.StringFlag{Name: "hook", Usage: "shell command run at start, before/after-copy, before-cutover, success, failure, rollback with ENGINEMIG_{STAGE,SCHEMA,TABLE,ROWS_COPIED,CAPTURE{,_START,_CUTOVER}} set; a failing start/before-* hook stops"},
			&cli.DurationFlag{Name: "hook-timeout", Value: time.Minute, Usage: "how long a hook may run"},
			&cli.StringFlag{Name: "state-schema", Value: state.DefaultStateSchema, Usage: "schema holding enginemig's state table (created if missing)"},
			&cli.UintFlag{Name: "server-id", Usage: "server_id for the binlog connection (default: random; must not clash with replicas)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text, markdown (a summary for the change ticket at the end) or json (a JSON summary on stdout at the end)"},
			&cli.BoolFlag{Name: "no-progress", Usage: "no progress bar; periodic log lines instead"},
			&cli.IntFlag{Name: "parallel", Value: 1, Usage: "with --plan: tables converted at a time, sharing one throttle (measured on 2 cores: 2 was no faster than 1, see docs/runbook/special-cases.md)"},
		), windowFlags()...),
		Action: runApply,
	}
}

func runApply(c *cli.Context) error {
	if o := c.String("output"); o != "text" && o != "json" && o != "markdown" {
		return outcome.Errorf(outcome.Usage, "--output must be text, markdown or json")
	}
	targets, skipped, err := applyTargets(c)
	if err != nil {
		return err
	}
	planRun := c.String("plan") != ""
	if planRun && len(targets) == 0 && len(skipped) == 0 {
		return nothingToDo(c)
	}
	gateMix, gateCapture, err := gateMixOf(c)
	if err != nil {
		return outcome.New(outcome.Usage, err, "see enginemig apply --help")
	}
	if err := diskOptions(c, &migration.Options{}); err != nil {
		return err // before connecting: bad input changes nothing
	}
	if err := paceOptions(c, &migration.Options{}); err != nil {
		return err
	}
	if err := checkWindows(c); err != nil {
		return err
	}
	ctx := c.Context
	db, conn, err := openDB(ctx, c, "", preflight.Pool)
	if err != nil {
		return err
	}
	defer db.Close()
	zone, err := zoneOf(ctx, c, db)
	if err != nil {
		return err
	}

	gates, err := migration.ParseGates(c.String("gate"))
	if err != nil {
		return outcome.New(outcome.Usage, err, "")
	}
	gateCfg := bench.GateConfig{Threads: c.Int("gate-threads"), Duration: c.Duration("gate-duration"), SampleRows: c.Int("gate-sample-rows"),
		Thresholds: bench.Thresholds{MinQPSRatio: c.Float64("gate-min-qps-ratio"), MaxP99Ratio: c.Float64("gate-max-p99-ratio")},
		Logger:     loggerOf(c)}
	gateCfg.Mix, gateCfg.CaptureMix = gateMix, gateCapture
	answersCheck, err := answersCheckOf(c)
	if err != nil {
		return err
	}

	if err := checkParallel(c, planRun); err != nil {
		return err
	}
	if planRun {
		if err := checkPlanAnswers(c, db, targets, &answersCheck); err != nil {
			return reportApply(c, planRun, nil, skipped, nil, "", err)
		}
	}
	run := &planrun.Runner{DB: db, Plan: planRun, StateSchema: c.String("state-schema"), Parallel: c.Int("parallel"), Logger: loggerOf(c),
		Options: func(tg planrun.Target) (migration.Options, error) {
			opts, err := applyOptions(c, conn, zone, tg, gates, gateCfg)
			if err != nil {
				return opts, err
			}
			opts.Answers = answersCheck
			opts.Logger = loggerOf(c).With(slog.String("table", tg.String()))
			if h := c.String("hook"); h != "" {
				opts.Hook = migration.CommandHook(h, c.Duration("hook-timeout"), opts.Logger)
			}
			return opts, nil
		},
		Show: progressOf(c)}
	results, summary, failed, err := run.Run(ctx, targets)
	if err != nil && failed == "" {
		return err
	}
	summary = append(skipped, summary...)
	if err == nil {
		err = planOutcome(summary)
	}
	var door *checkReport
	if planRun && err == nil {
		door = doorAfterPlan(c, db, targets)
	}
	return reportApply(c, planRun, results, summary, door, failed, err)
}

// checkPlanAnswers runs the answers check on every table of a plan before the first is
// converted: every statement whose answer changes is named at once, not one table's at a time.
// The tables' runs then need not check again (a is turned off).
func checkPlanAnswers(c *cli.Context, db *sql.DB, targets []planrun.Target, a *migration.AnswersCheck) error {
	if len(targets) < 2 || a.Off {
		return nil
	}
	var tables [][2]string
	for _, tg := range targets {
		tables = append(tables, [2]string{tg.Schema, tg.Table})
	}
	if _, err := migration.CheckAnswersOfTables(c.Context, db, tables, *a, loggerOf(c)); err != nil {
		return err
	}
	a.Off = true
	return nil
}

// checkParallel refuses what parallel runs cannot do: one control socket controls one migration.
func checkParallel(c *cli.Context, planRun bool) error {
	switch parallel := c.Int("parallel"); {
	case parallel < 1:
		return outcome.New(outcome.Usage, errors.New("--parallel must be at least 1"), "")
	case parallel > 1 && !planRun:
		return outcome.New(outcome.Usage, errors.New("--parallel needs --plan"), "")
	case parallel > 1 && c.String("control-socket") != "":
		return outcome.New(outcome.Usage, errors.New("--control-socket controls one migration, not --parallel ones"),
			"drop --control-socket, or use --parallel 1")
	}
	return nil
}

// progressOf shows a table's progress as its migration runs (a bar, or with tables running at
// once, whose bars would overwrite each other, periodic lines) and prints its result at the end.
func progressOf(c *cli.Context) func(planrun.Target, *migration.Options) func(*migration.Result) {
	var out sync.Mutex // the result lines of tables that finish at the same time
	parallel := c.Int("parallel")
	return func(tg planrun.Target, opts *migration.Options) func(*migration.Result) {
		display := newProgressDisplay(c.App.ErrWriter, !c.Bool("no-progress") && parallel == 1, tg.String())
		if parallel == 1 {
			onLog(c, display.clear)
		}
		opts.Progress = display.update
		return func(res *migration.Result) {
			display.finish()
			if res != nil && c.String("output") == "text" {
				out.Lock()
				printApplyResult(c.App.Writer, res)
				out.Unlock()
			}
			if parallel == 1 {
				onLog(c, nil)
			}
		}
	}
}

// reportApply prints the end of a run (a plan's per-table summary; the JSON document) and returns
// its error: failed names the table that failed, if one did.
func reportApply(c *cli.Context, planRun bool, results []*migration.Result, summary []planrun.Outcome, door *checkReport, failed string, err error) error {
	if planRun && c.String("output") == "text" {
		planSummary(c.App.Writer, summary)
		if door != nil {
			fmt.Fprintln(c.App.Writer)
			writeCheck(c.App.Writer, *door)
		}
	}
	if c.String("output") == "markdown" {
		writeApplyMarkdown(c.App.Writer, results, summary, door, err)
	}
	if c.String("output") == "json" {
		out := map[string]any{"results": results, "exit_code": int(outcome.CodeOf(err)), "status": outcome.CodeOf(err).Name()}
		if planRun {
			out["tables"] = summary
		}
		if door != nil {
			out["myisam_left"] = door
		}
		if err != nil {
			out["error"] = err.Error()
		}
		if failed != "" {
			out["failed_table"] = failed
		}
		writeJSON(c.App.Writer, out)
	}
	return err
}

// nothingToDo ends a plan run whose plan lists no table (a re-run after every table was
// converted): exit 0 without connecting, and in JSON "nothing_to_do": true for scripts.
func nothingToDo(c *cli.Context) error {
	if c.String("output") == "json" {
		writeJSON(c.App.Writer, map[string]any{"results": []*migration.Result{}, "tables": []planrun.Outcome{}, "nothing_to_do": true,
			"exit_code": int(outcome.OK), "status": outcome.OK.Name()})
		return nil
	}
	fmt.Fprintf(c.App.Writer, "nothing to do: %s lists no MyISAM table\n", c.String("plan"))
	return nil
}

// maxCopyWorkers bounds --copy-workers: each worker is a connection and, while nobody waits for
// the table, a share of the server's cores.
const maxCopyWorkers = 8

// diskOptions reads --disk-reserve, --disk-pause-limit and --disk-give-up.
func diskOptions(c *cli.Context, opts *migration.Options) error {
	if c.IsSet("disk-reserve") {
		r, err := diskspace.ParseReserve(c.String("disk-reserve"))
		if err != nil {
			return outcome.New(outcome.Usage, err, "e.g. --disk-reserve 2G, --disk-reserve 10%, or --disk-reserve 0")
		}
		opts.DiskReserve = &r
	}
	if opts.DiskPauseLimit = c.Duration("disk-pause-limit"); opts.DiskPauseLimit <= 0 {
		return outcome.New(outcome.Usage, errors.New("--disk-pause-limit must be positive"), "e.g. --disk-pause-limit 30m")
	}
	switch c.String("disk-give-up") {
	case "drop":
	case "keep":
		opts.DiskKeep = true
	default:
		return outcome.New(outcome.Usage, fmt.Errorf("--disk-give-up %q: want drop or keep", c.String("disk-give-up")),
			"drop gives the shadow's space back (exit 6); keep keeps it for a resume (exit 7)")
	}
	return nil
}

// paceOptions reads --latency-target.
func paceOptions(c *cli.Context, opts *migration.Options) error {
	f := c.Float64("latency-target")
	switch {
	case c.IsSet("latency-target") && c.Bool("fixed-pace"):
		return outcome.New(outcome.Usage, errors.New("--latency-target belongs to the automatic pace, which --fixed-pace turns off"), "drop one of the two")
	case math.IsNaN(f) || f < 0 || f > 0 && f < 1:
		return outcome.New(outcome.Usage, fmt.Errorf("--latency-target %v: want a factor of 1 or more of the application's p99 before the copy, or 0 to turn the target off", f),
			"e.g. --latency-target 1.5 (the default) or --latency-target 3")
	case f == 0:
		opts.LatencyTarget = -1 // Options' zero means the default
	default:
		opts.LatencyTarget = f
	}
	return nil
}

// applyOptions turns the flags into one table's migration options.
func applyOptions(c *cli.Context, conn dbconn.Config, zone windowZone, tg planrun.Target, gates map[migration.Point]bool, gateCfg bench.GateConfig) (migration.Options, error) {
	opts := migration.Options{
		Conn: conn, Schema: tg.Schema, Table: tg.Table, DryRun: c.Bool("dry-run"),
		ChunkTime:   c.Duration("chunk-time"),
		ClientSide:  c.Bool("client-side-copy"),
		KeepKeyless: c.Bool("keep-keyless"),
		MaxHold:     c.Duration("max-hold"),
		CopyWorkers: c.Int("copy-workers"),
		Capture:     c.String("capture"),
		SkipVerify:  c.Bool("skip-verify"),
		StateSchema: c.String("state-schema"),
		ServerID:    uint32(c.Uint("server-id")),
		Cutover: cutover.Config{LockWait: c.Duration("cutover-lock-wait"), CatchUp: c.Duration("cutover-catch-up"),
			Attempts: c.Int("cutover-attempts"), Backoff: c.Duration("cutover-backoff"), LongQuery: c.Duration("long-query"),
			SnapshotWait: c.Duration("snapshot-wait"), Timeout: c.Duration("cutover-timeout")},
		PostponeFile: c.String("postpone-cutover-file"),
		Gates:        gates, GateConfig: gateCfg,
		MaxThreadsRunning: c.Int("max-threads-running"), MaxLag: c.Duration("max-lag"), FixedPace: c.Bool("fixed-pace"),
		ControlSocket: c.String("control-socket"),
		MetricsListen: c.String("metrics-listen"),
		LockTimeout:   c.Duration("lock-timeout"),
		ReconnectFor:  c.Duration("reconnect-for"),
	}
	switch {
	case opts.ReconnectFor < 0:
		return opts, outcome.New(outcome.Usage, errors.New("--reconnect-for must not be negative"), "e.g. --reconnect-for 5m, or 0 to exit at a lost connection")
	case opts.ReconnectFor == 0:
		opts.ReconnectFor = -1 // Options' zero means the default
	}
	if opts.LockTimeout <= 0 {
		return opts, outcome.New(outcome.Usage, errors.New("--lock-timeout must be positive"), "e.g. --lock-timeout 30s")
	}
	if opts.Cutover.SnapshotWait < 0 {
		return opts, outcome.New(outcome.Usage, errors.New("--snapshot-wait must not be negative"), "e.g. --snapshot-wait 30s, or 0 not to wait")
	}
	if err := diskOptions(c, &opts); err != nil {
		return opts, err
	}
	if err := paceOptions(c, &opts); err != nil {
		return opts, err
	}
	if err := windowOptions(c, zone, &opts); err != nil {
		return opts, err
	}
	if opts.CopyWorkers < 0 || opts.CopyWorkers > maxCopyWorkers {
		return opts, outcome.New(outcome.Usage, fmt.Errorf("--copy-workers %d is out of range", opts.CopyWorkers),
			fmt.Sprintf("give 1 to %d, or 0 to let apply choose", maxCopyWorkers))
	}
	for _, r := range c.StringSlice("replica") {
		rc, err := replicaConfig(conn, r)
		if err != nil {
			return opts, outcome.New(outcome.Usage, err, "")
		}
		opts.Replicas = append(opts.Replicas, rc)
	}
	if d := c.Duration("postpone-max"); d > 0 {
		opts.PostponeUntil = time.Now().Add(d)
	}
	return opts, nil
}

func applyTargets(c *cli.Context) ([]planrun.Target, []planrun.Outcome, error) {
	switch {
	case c.String("plan") != "" && (c.String("table") != ""):
		return nil, nil, outcome.Errorf(outcome.Usage, "give either --plan or --table, not both")
	case c.String("plan") != "":
		return planTargets(c.String("plan"), loggerOf(c))
	case c.String("database") == "" || c.String("table") == "":
		return nil, nil, outcome.Errorf(outcome.Usage, "--database and --table are required (or --plan)")
	}
	return []planrun.Target{{Schema: c.String("database"), Table: c.String("table")}}, nil, nil
}

func printApplyResult(w io.Writer, r *migration.Result) {
	verb := "converted"
	if r.DryRun {
		verb = "dry run of"
	}
	fmt.Fprintf(w, "%s %s.%s: %d rows copied in %s (source reads %s), %d changes replayed, %d secondary index(es) built in %s, total %s\n",
		verb, r.Schema, r.Table, r.RowsCopied, r.CopyTime.Round(time.Millisecond), r.CopyLockTime.Round(time.Millisecond),
		r.CaptureChanges, r.DeferredIndex, r.IndexTime.Round(time.Millisecond), r.TotalTime.Round(time.Millisecond))
	for _, ch := range r.ShadowChanges {
		fmt.Fprintf(w, "  note: %s\n", ch)
	}
	if r.Verify != nil {
		fmt.Fprintf(w, "  verified: %d rows in %d chunks, %d chunk(s) recopied\n", r.Verify.Rows, r.Verify.Chunks, r.Verify.Repaired)
	}
	if p := r.Pace; p != nil && p.Reads > 0 {
		lat := func(s float64) time.Duration {
			return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond)
		}
		target := "no target"
		if p.Target > 0 {
			target = "target " + lat(p.Target).String()
		}
		fmt.Fprintf(w, "  the application's latency (a primary-key read, p99): %s before, %s during the copy and verification (%s)\n",
			lat(p.Baseline), lat(p.P99), target)
	}
	if e := r.Estimate; e != nil && e.ActualSeconds > 0 {
		fmt.Fprintf(w, "  copy and index build took %s, estimated %s at the start (%.2fx)\n",
			secs(e.ActualSeconds), secs(e.EstimatedSeconds), e.Ratio)
	}
	for _, g := range r.Gates {
		fmt.Fprintf(w, "  gate %s: %s\n", g.Gate, g.Verdict())
	}
	if r.Cutover != nil {
		at := ""
		if r.Cutover.Position != "" {
			at = ", at capture position " + r.Cutover.Position
		}
		fmt.Fprintf(w, "  cut-over: %d attempt(s), table locked %s%s; original kept as %s.%s (MyISAM)\n",
			r.Cutover.Attempts, r.Cutover.LockHeld.Round(time.Millisecond), at, r.Schema, r.OldTable)
	} else if r.DryRun {
		fmt.Fprintf(w, "  the table is unchanged; the shadow was dropped\n")
	}
	switch {
	case r.DryRun && len(r.Triggers) > 0:
		fmt.Fprintf(w, "  the cut-over would carry the triggers with these statements:\n")
		for _, s := range r.Triggers {
			fmt.Fprintf(w, "    %s;\n", strings.ReplaceAll(s, "\n", "\n    "))
		}
	case len(r.Triggers) > 0:
		fmt.Fprintf(w, "  triggers carried to the InnoDB table: %s\n", strings.Join(r.Triggers, ", "))
	}
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// replicaConfig is the primary's connection settings pointed at host:port.
func replicaConfig(primary dbconn.Config, hostPort string) (dbconn.Config, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return dbconn.Config{}, fmt.Errorf("--replica %q: want host:port", hostPort)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 {
		return dbconn.Config{}, fmt.Errorf("--replica %q: bad port", hostPort)
	}
	rc := primary
	rc.Host, rc.Port, rc.Socket = host, n, ""
	return rc, nil
}

// secs prints seconds as a duration rounded for reading.
func secs(s float64) time.Duration {
	d := time.Duration(s * float64(time.Second))
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}
