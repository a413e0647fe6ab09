package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
)

// build is one tool under test: an enginemig binary, or native ALTER, pt-osc, gh-ost or no
// conversion (kind); for no conversion, alone is how long the load runs by itself.
type build struct {
	name, path string
	alone      time.Duration
}

// Kinds of build other than an enginemig binary.
const (
	nativeALTER = ""
	ptOSC       = "pt-online-schema-change"
	ghOST       = "gh-ost"
	// noConversion converts nothing: the load runs alone for as long as enginemig took at that level.
	noConversion = "no conversion"
)

var compareBin, ghostBin, ghostArgs string
var skipNative, withControl bool

func run(ctx context.Context, sh shape, rows, threads int, shares []float64, window time.Duration, idleOnly bool) error {
	// A directory of this run's own: two benchmarks at once must not build over each other's binary.
	dir, err := os.MkdirTemp("", "applybench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "enginemig")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/enginemig").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	builds := enginemigBuilds(bin)
	args := []string{"--key-buffer-size=512M", "--max-binlog-size=1G"}
	if ghostBin != "" {
		args = append(args, "--binlog-row-image=FULL", "--log-slave-updates=ON")
	}
	srv, err := sandbox.Start(ctx, sandbox.Options{BufferPool: "2G", BinlogFormat: binlogFormat,
		ExtraArgs: append(args, strings.Fields(serverArgs)...)})
	if err != nil {
		return err
	}
	defer srv.Stop()
	serverPid = srv.Pid()
	db, err := srv.Open("")
	if err != nil {
		return err
	}
	if _, err := db.Exec("CREATE DATABASE game"); err != nil {
		return err
	}
	db.Close()
	db, _ = srv.Open("game")
	db.SetMaxOpenConns(threads + 8)
	defer db.Close()
	fmt.Printf("MariaDB sandbox, binlog %s, %d rows%s, %d CPUs; %s\n\n", binlogFormat, rows, describe(sh), numCPU(), loadAvg())
	if costOnly {
		return captureCost(ctx, db, rows)
	}
	if withPTOSC {
		builds = append(builds, build{name: "pt-osc", path: ptOSC})
	}
	if ghostBin != "" {
		builds = append(builds, build{name: "gh-ost", path: ghOST})
	}
	if !loadOnly {
		if err := runIdle(db, sh, srv.Port, rows, builds); err != nil || idleOnly {
			return err
		}
	}
	if !skipNative {
		builds = append([]build{{name: "native", path: nativeALTER}}, builds...)
	}
	if err := sh.seed(db, sh.table(), rows); err != nil {
		return err
	}
	l := load{db: db, shape: sh, threads: threads, rows: rows}
	for i, share := range shares {
		// Measured again before each level, on a freshly seeded table: over a long run the server
		// did not keep what it served at the start (docs/bench/applybench.md), and a level set
		// from that first figure asked more than the machine could serve.
		if i > 0 {
			if err := sh.seed(db, sh.table(), rows); err != nil {
				return err
			}
		}
		capacity, windows := measureCapacity(ctx, l, window)
		fmt.Printf("\ncapacity: %.0f requests/s unthrottled, the median of %s (%d threads, %d statements a request, %d errors); %s\n",
			capacity.rps, windows, threads, len(sh.request(0)), capacity.errors, loadAvg())
		fmt.Printf("load %.0f%% of capacity: %.0f requests/s\n", 100*share, share*capacity.rps)
		if err := runLevel(ctx, l, srv.Port, share*capacity.rps, window, builds); err != nil {
			return err
		}
	}
	return nil
}

// enginemigBuilds are the enginemig binaries to measure: bin, after -compare-bin's. Each build
// runs on an identical, freshly seeded table in the same run, so a before/after comparison is
// not skewed by the machine's mood.
func enginemigBuilds(bin string) []build {
	if compareBin == "" {
		return []build{{name: "enginemig", path: bin}}
	}
	var builds []build
	bins := strings.Split(compareBin, ",")
	for _, b := range bins {
		name := "before"
		if len(bins) > 1 {
			name = filepath.Base(b)
		}
		builds = append(builds, build{name: name, path: b})
	}
	return append(builds, build{name: "after", path: bin})
}

// runLevel runs every build under the load at rate, repeat times in turn (A, B, A, B: the
// machine's drift over the level is shared), and with several runs prints each build's medians.
func runLevel(ctx context.Context, l load, port int, rate float64, window time.Duration, builds []build) error {
	levelBuilds := slices.Clip(builds)
	if withControl {
		levelBuilds = append(levelBuilds, build{name: "control (no conversion)", path: noConversion})
	}
	var runs []loaded
	for r := 0; r < max(repeat, 1); r++ {
		var native, enginemig time.Duration
		for _, b := range levelBuilds {
			if b.path == noConversion {
				b.alone = enginemig
			}
			res, err := runLoaded(ctx, l, port, rate, window, b, native)
			if err != nil {
				return err
			}
			runs = append(runs, res)
			switch b.path {
			case nativeALTER:
				native = res.took
			case ptOSC, ghOST, noConversion:
			default:
				enginemig = res.took
			}
		}
	}
	if repeat > 1 {
		fmt.Print(summarize(runs, levelBuilds))
	}
	return nil
}

// runIdle converts identical tables with native ALTER and with each build, nothing else running.
func runIdle(db *sql.DB, sh shape, port, rows int, builds []build) error {
	if err := sh.seed(db, "native", rows); err != nil {
		return err
	}
	start := time.Now()
	if _, err := db.Exec("ALTER TABLE native ENGINE=InnoDB"); err != nil {
		return err
	}
	native := time.Since(start)
	fmt.Printf("idle conversion: native ALTER %.2fs; %s\n", native.Seconds(), loadAvg())
	for _, b := range builds {
		if err := sh.seed(db, sh.table(), rows); err != nil {
			return err
		}
		cpu0, _ := processCPU(serverPid)
		idle, err := convert(context.Background(), db, b, port, sh.table())
		if err != nil {
			return err
		}
		cpu1, _ := processCPU(serverPid)
		if b.path == ptOSC || b.path == ghOST {
			fmt.Printf("  %s %.2fs, ratio %.2fx\n", b.name, idle.wall.Seconds(), idle.wall.Seconds()/native.Seconds())
			continue
		}
		idleWork[b.name] = cpu1 - cpu0 + idle.cpu
		fmt.Printf("  %s apply %.2fs (copy %.2fs, index build %.2fs, verify %.2fs), ratio %.2fx, enginemig CPU %.2fs, server CPU %.2fs, peak RSS %d MiB\n",
			b.name, idle.wall.Seconds(), idle.copySec, idle.indexSec, idle.verifySec, idle.wall.Seconds()/native.Seconds(), idle.cpu.Seconds(), (cpu1 - cpu0).Seconds(), idle.maxRSSKiB/1024)
	}
	return nil
}

// convert converts game.table with b, watching its stages when it is enginemig.
func convert(ctx context.Context, db *sql.DB, b build, port int, table string) (applyResult, error) {
	start := time.Now()
	var err error
	switch b.path {
	case nativeALTER:
		_, err = db.ExecContext(ctx, "ALTER TABLE "+table+" ENGINE=InnoDB")
	case ptOSC:
		err = runPTOSC(port, table)
	case ghOST:
		err = runGhost(port, table)
	case noConversion:
		select {
		case <-time.After(b.alone):
		case <-ctx.Done():
			err = ctx.Err()
		}
	default:
		return runApply(ctx, b.path, port, table)
	}
	return applyResult{wall: time.Since(start)}, err
}

// runLoaded runs the load at rate requests/s on a freshly seeded table, measures it for window,
// then converts the table with b while the load goes on, and prints what the application kept.
// native is native ALTER's wall time under the same load (0: not measured), for the ratio.
func runLoaded(ctx context.Context, l load, port int, rate float64, window time.Duration, b build, native time.Duration) (loaded, error) {
	if err := l.shape.seed(l.db, l.shape.table(), l.rows); err != nil {
		return loaded{}, err
	}
	m0, _ := readMachineCPU()
	base := l.run(ctx, rate, window, nil)
	m1, _ := readMachineCPU()
	busy := busyCores(m0, m1, numCPU())
	loadCtx, stop := context.WithCancel(ctx)
	result := make(chan loadStats, 1)
	began := make(chan time.Time, 1)
	go func() { result <- l.run(loadCtx, rate, 0, began) }()
	time.Sleep(time.Second)
	t0 := time.Now()
	began <- t0
	ar, err := convert(ctx, l.db, b, port, l.shape.table())
	t1 := time.Now()
	time.Sleep(time.Second)
	stop()
	during := <-result
	if err != nil {
		return loaded{}, fmt.Errorf("%s under load: %w", b.name, err)
	}
	took := t1.Sub(t0)
	all, per := shares(during.seconds.Counts(), t0, t1, rate, ar.stages)
	ratio := ""
	if native > 0 && b.path != noConversion {
		ratio = fmt.Sprintf(" (%.1fx native's)", took.Seconds()/native.Seconds())
	}
	fmt.Printf("  %s: conversion %.2fs%s; application %.0f%% of its target rate over the conversion, worst second %.0f%%; p99 request %s before, %s during; longest write stall %s; failed requests %d; baseline %.0f%% of target, so the application kept %.0f%% of what it served before; %s\n",
		b.name, took.Seconds(), ratio, 100*all.mean, 100*all.worst, base.p99.Round(100*time.Microsecond), during.p99.Round(100*time.Microsecond),
		during.maxWriteGap.Round(time.Millisecond), during.errors+base.errors, 100*base.rps/rate, 100*all.mean*rate/base.rps, loadAvg())
	if base.rps < saturated*rate {
		fmt.Printf("  %s: VOID: the load reached only %.0f%% of its target before the conversion; the server was saturated, and the shares above measure that, not the conversion\n",
			b.name, 100*base.rps/rate)
	}
	before, whole := latencyOf(base.stmts, time.Time{}, time.Now()), latencyOf(during.stmts, t0, t1)
	byStage := latencyByStage(during.stmts, t0, t1, ar.stages)
	fmt.Printf("  %s: latency before: %s; during: %s\n", b.name, formatLatency(before), formatLatency(whole))
	if len(ar.stages) > 0 {
		fmt.Printf("  %s: per stage: %s\n", b.name, formatShares(per))
		fmt.Printf("  %s: latency per stage: %s\n", b.name, formatStageLatency(byStage))
	}
	if len(during.longGaps) > 0 {
		fmt.Printf("  %s: write stalls over %s: %s\n", b.name, longGap, formatGaps(during.longGaps, ar.stages))
	}
	if b.path != nativeALTER && b.path != ptOSC && b.path != ghOST && b.path != noConversion {
		fmt.Printf("  %s: copy %.2fs, index build %.2fs, verify %.2fs (%d chunks let the source go while the shadow was behind); %d changes replayed (%.0f/s over the conversion), cut-over lock %s, peak RSS %d MiB\n",
			b.name, ar.copySec, ar.indexSec, ar.verifySec, ar.behindRetries, ar.events, float64(ar.events)/took.Seconds(), ar.lockHeld, ar.maxRSSKiB/1024)
		if ar.verifyChunks > 0 {
			fmt.Printf("  %s: verify's %d chunks: taking their locks %.2fs, holding them %.2fs, on the target after the release %.2fs, the rest (rests, planning) %.2fs\n",
				b.name, ar.verifyChunks, ar.verifyWait.Seconds(), ar.verifyHeld.Seconds(), ar.verifyAfter.Seconds(),
				ar.verifySec-(ar.verifyWait+ar.verifyHeld+ar.verifyAfter).Seconds())
		}
	}
	if work, ok := idleWork[b.name]; ok {
		fmt.Printf("  %s: before the conversion the load kept %.2f of %d cores busy; the idle conversion used %.2fs of CPU (server and enginemig)\n",
			b.name, busy, numCPU(), work.Seconds())
	}
	res := loaded{build: b.name, took: took, mean: all.mean, worst: all.worst, p99: during.p99, stall: during.maxWriteGap,
		void: base.rps < saturated*rate, before: before, during: whole}
	if err := record(reportOf(res, rate, per, byStage)); err != nil {
		return res, err
	}
	return res, nil
}

// loadAvg is the machine's load average, printed with every measurement: other jobs on a shared
// machine change the figures.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(f[:3], " ")
}

// saturated: a baseline under this share of the target rate means the server could not serve
// the load before any tool ran, and a level measured so is void.
const saturated = 0.95

// capacityWindows: the capacity is the median of this many windows. One window's figure moves
// too much between levels of one run (docs/bench/constants.md, "Measurements behind the code's constants"),
// and a level set from a high one asked more than the server then kept serving.
const capacityWindows = 3

// measureCapacity runs the load unthrottled for capacityWindows windows and returns the median
// window, with every window's rate for the report.
func measureCapacity(ctx context.Context, l load, window time.Duration) (loadStats, string) {
	runs := make([]loadStats, capacityWindows)
	rates := make([]string, capacityWindows)
	for i := range runs {
		runs[i] = l.run(ctx, 0, window, nil)
		rates[i] = fmt.Sprintf("%.0f", runs[i].rps)
	}
	sort.Slice(runs, func(a, b int) bool { return runs[a].rps < runs[b].rps })
	return runs[capacityWindows/2], strings.Join(rates, ", ")
}
