// Command applybench measures enginemig apply against native ALTER TABLE ... ENGINE=InnoDB on the
// same game-state table in one run, idle and under the production query mix (bench.WebMix), and
// prints the figures.
//
//	go run ./bench/cmd/applybench -rows 2000000
//
// It starts its own sandbox server and builds enginemig; nothing else is touched.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/sandbox"
)

func main() {
	rows := flag.Int("rows", 2_000_000, "rows in the game-state table")
	threads := flag.Int("threads", 16, "application threads for the loaded run")
	loadShare := flag.Float64("load", 0.5, "application load as a share of measured capacity")
	window := flag.Duration("window", 10*time.Second, "baseline measurement window")
	skipLoad := flag.Bool("idle-only", false, "skip the runs under load")
	flag.StringVar(&serverArgs, "server-args", "", "extra mariadbd arguments for the sandbox, space separated (e.g. \"--innodb-log-file-size=1G\")")
	flag.StringVar(&compareBin, "compare-bin", "", "an older enginemig binary to measure in the same run, on identical tables (before/after)")
	flag.StringVar(&extraApplyArgs, "apply-args", "", "extra arguments for enginemig apply, space separated (e.g. \"--chunk-time 50ms\")")
	flag.StringVar(&binlogFormat, "binlog-format", "ROW", "the sandbox's binlog: ROW, STATEMENT, MIXED or OFF (apply's --capture auto then chooses triggers)")
	flag.BoolVar(&withPTOSC, "pt-osc", false, "also measure pt-online-schema-change --alter ENGINE=InnoDB under the same load")
	flag.BoolVar(&loadOnly, "load-only", false, "skip the idle runs")
	flag.BoolVar(&noAutoInc, "no-autoinc", false, "seed the table without AUTO_INCREMENT on its key (copy chunks can then run in parallel: copier/parallel.go)")
	flag.BoolVar(&costOnly, "capture-cost", false, "only measure what trigger capture adds to a single-row UPDATE, then exit")
	flag.Parse()
	ctx := context.Background()
	if err := run(ctx, *rows, *threads, *loadShare, *window, *skipLoad); err != nil {
		fmt.Fprintln(os.Stderr, "applybench:", err)
		os.Exit(1)
	}
}

const ddl = `CREATE TABLE %s (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  player INT NOT NULL, coins INT NOT NULL, level SMALLINT NOT NULL, score INT NOT NULL,
  name CHAR(40) NOT NULL,
  PRIMARY KEY (id), KEY player (player)
) ENGINE=MyISAM`

func seed(db *sql.DB, name string, rows int) error {
	if _, err := db.Exec("DROP TABLE IF EXISTS " + name + ", _" + name + "_old, _" + name + "_new"); err != nil {
		return err
	}
	nextID.Store(int64(rows))
	create := fmt.Sprintf(ddl, name)
	if noAutoInc {
		create = strings.Replace(create, " AUTO_INCREMENT", "", 1)
	}
	if _, err := db.Exec(create); err != nil {
		return err
	}
	_, err := db.Exec(fmt.Sprintf(`INSERT INTO %s (id, player, coins, level, score, name)
		SELECT seq, seq %% 100000, seq %% 977, seq %% 60, seq * 7 %% 100003, SHA1(seq) FROM seq_1_to_%d`, name, rows))
	if err != nil {
		return err
	}
	// Reopened, the table is what a production table is when the migration starts; and with
	// -server-args --myisam-use-mmap=1, MyISAM maps the data file as long as it is when opened.
	_, err = db.Exec("FLUSH TABLES " + name)
	return err
}

func run(ctx context.Context, rows, threads int, share float64, window time.Duration, idleOnly bool) error {
	bin := filepath.Join(os.TempDir(), "enginemig-applybench")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/enginemig").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	// Each build runs on an identical, freshly seeded table in the same run, so a before/after
	// comparison is not skewed by the machine's mood.
	builds := []build{{"enginemig", bin}}
	if compareBin != "" {
		builds = []build{{"before", compareBin}, {"after", bin}}
	}
	srv, err := sandbox.Start(ctx, sandbox.Options{BufferPool: "2G", BinlogFormat: binlogFormat,
		ExtraArgs: append([]string{"--key-buffer-size=512M", "--max-binlog-size=1G"}, strings.Fields(serverArgs)...)})
	if err != nil {
		return err
	}
	defer srv.Stop()
	serverPid = srv.Pid()
	db, err := srv.Open("")
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(threads + 8)
	if _, err := db.Exec("CREATE DATABASE game"); err != nil {
		return err
	}
	db.Close()
	db, _ = srv.Open("game")
	db.SetMaxOpenConns(threads + 8)
	defer db.Close()
	fmt.Printf("MariaDB sandbox, binlog %s, %d rows, GOMAXPROCS machine: %d CPUs\n\n", binlogFormat, rows, numCPU())
	if costOnly {
		return captureCost(ctx, db, rows)
	}
	if withPTOSC {
		builds = append(builds, build{"pt-osc", ptOSC})
	}
	if !loadOnly {
		if err := runIdle(db, srv.Port, rows, builds); err != nil || idleOnly {
			return err
		}
	}
	var native time.Duration
	for _, b := range append([]build{{"native", ""}}, builds...) {
		took, err := runLoaded(ctx, db, srv.Port, rows, threads, share, window, b, native)
		if err != nil {
			return err
		}
		if b.path == "" {
			native = took
		}
	}
	return nil
}

// build is one enginemig binary under test ("" path: native ALTER).
type build struct{ name, path string }

var compareBin string

// runIdle converts identical tables with native ALTER and with each build, nothing else running.
func runIdle(db *sql.DB, port, rows int, builds []build) error {
	if err := seed(db, "native", rows); err != nil {
		return err
	}
	start := time.Now()
	if _, err := db.Exec("ALTER TABLE native ENGINE=InnoDB"); err != nil {
		return err
	}
	native := time.Since(start)
	fmt.Printf("idle conversion: native ALTER %.2fs\n", native.Seconds())
	for _, b := range builds {
		if err := seed(db, "state", rows); err != nil {
			return err
		}
		if b.path == ptOSC {
			start := time.Now()
			if err := runPTOSC(port, "state"); err != nil {
				return err
			}
			took := time.Since(start)
			fmt.Printf("  %s %.2fs, ratio %.2fx\n", b.name, took.Seconds(), took.Seconds()/native.Seconds())
			continue
		}
		cpu0, _ := processCPU(serverPid)
		idle, err := runApply(b.path, port, "state")
		if err != nil {
			return err
		}
		cpu1, _ := processCPU(serverPid)
		idleWork[b.name] = cpu1 - cpu0 + idle.cpu
		fmt.Printf("  %s apply %.2fs (copy %.2fs, index build %.2fs, verify %.2fs), ratio %.2fx, enginemig CPU %.2fs, server CPU %.2fs, peak RSS %d MiB\n",
			b.name, idle.wall.Seconds(), idle.copySec, idle.indexSec, idle.verifySec, idle.wall.Seconds()/native.Seconds(), idle.cpu.Seconds(), (cpu1 - cpu0).Seconds(), idle.maxRSSKiB/1024)
	}
	return nil
}

// runLoaded measures capacity, then runs the mix at a share of it during one conversion.
// It returns the conversion's wall time; native is native ALTER's under the same load (0 while
// measuring native itself), for the ratio.
func runLoaded(ctx context.Context, db *sql.DB, port, rows, threads int, share float64, window time.Duration, b build, native time.Duration) (time.Duration, error) {
	if err := seed(db, "state", rows); err != nil {
		return 0, err
	}
	capacity := measure(ctx, db, threads, 0, 5*time.Second, rows)
	rate := capacity.qps * share
	m0, _ := readMachineCPU()
	base := measure(ctx, db, threads, rate, window, rows)
	m1, _ := readMachineCPU()
	busy := busyCores(m0, m1, numCPU())
	loadCtx, stop := context.WithCancel(ctx)
	result := make(chan loadStats, 1)
	go func() { result <- measure(loadCtx, db, threads, rate, 0, rows) }()
	time.Sleep(time.Second)
	t0 := time.Now()
	var ar applyResult
	var err error
	switch b.path {
	case "":
		_, err = db.Exec("ALTER TABLE state ENGINE=InnoDB")
	case ptOSC:
		err = runPTOSC(port, "state")
	default:
		ar, err = runApply(b.path, port, "state")
	}
	took := time.Since(t0)
	time.Sleep(time.Second)
	stop()
	during := <-result
	if err != nil {
		return 0, fmt.Errorf("%s under load: %w", b.name, err)
	}
	fmt.Printf("\nunder load (%d threads, %s mix, target %.0f q/s = %.0f%% of capacity %.0f q/s):\n", threads, appMix, rate, share*100, capacity.qps)
	ratio := ""
	if native > 0 {
		ratio = fmt.Sprintf(" (%.1fx native's)", took.Seconds()/native.Seconds())
	}
	fmt.Printf("  %s: conversion %.2fs%s; baseline %.0f q/s; during %.0f q/s (%.0f%% of baseline); failed queries %d; longest time with no completed write %s; p99 %s before, %s during\n",
		b.name, took.Seconds(), ratio, base.qps, during.qps, 100*during.qps/base.qps, during.errors, during.maxWriteGap.Round(time.Millisecond),
		base.p99.Round(100*time.Microsecond), during.p99.Round(100*time.Microsecond))
	if len(during.longGaps) > 0 {
		fmt.Printf("  %s: write gaps over %s: %s\n", b.name, longGap, strings.Join(during.longGaps, ", "))
	}
	if b.path != "" && b.path != ptOSC {
		fmt.Printf("  %s: copy %.2fs, index build %.2fs, verify %.2fs (%d chunks let the source go while the shadow was behind); %d changes replayed (%.0f/s over the copy), cut-over lock %s, peak RSS %d MiB\n",
			b.name, ar.copySec, ar.indexSec, ar.verifySec, ar.behindRetries, ar.events, float64(ar.events)/max(ar.copySec, 0.001), ar.lockHeld, ar.maxRSSKiB/1024)
	}
	if work, ok := idleWork[b.name]; ok {
		fmt.Printf("  %s: before the conversion the load (with its generator) kept %.2f of %d cores busy; the idle conversion used %.2fs of CPU (server and enginemig), %.2f cores on average over this conversion\n",
			b.name, busy, numCPU(), work.Seconds(), work.Seconds()/took.Seconds())
	}
	return took, nil
}

type applyResult struct {
	wall      time.Duration
	copySec   float64
	indexSec  float64
	verifySec float64
	cpu       time.Duration // enginemig's own CPU time (user and system)
	events    int64
	lockHeld  time.Duration
	maxRSSKiB int64
	// behindRetries: verification chunks that let the source go because the shadow was behind.
	behindRetries int
}

var extraApplyArgs, serverArgs, binlogFormat string
var withPTOSC, costOnly, noAutoInc, loadOnly bool

// serverPid is the sandbox server's process; idleWork is each build's CPU (server and
// enginemig) for the idle conversion, which the loaded runs print beside the load's.
var serverPid int
var idleWork = map[string]time.Duration{}

// nextID is the last key the seed or the load's INSERTs used, for a table without AUTO_INCREMENT.
var nextID atomic.Int64

// ptOSC stands for pt-online-schema-change in a build list.
const ptOSC = "pt-online-schema-change"

// runPTOSC converts the table with pt-online-schema-change (percona-toolkit), as a DBA would.
func runPTOSC(port int, table string) error {
	cmd := exec.Command(ptOSC, "--alter", "ENGINE=InnoDB", "--execute", "--no-check-unique-key-change",
		fmt.Sprintf("h=127.0.0.1,P=%d,u=root,D=game,t=%s", port, table))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pt-online-schema-change: %v\n%s", err, out)
	}
	return nil
}

func runApply(bin string, port int, table string) (applyResult, error) {
	args := []string{"apply", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--user", "root",
		"--ssl-mode", "DISABLED", "--database", "game", "--table", table, "--output", "json", "--no-progress"}
	args = append(args, strings.Fields(extraApplyArgs)...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME=/nonexistent")
	cmd.Stderr = os.Stderr
	start := time.Now()
	out, err := cmd.Output()
	res := applyResult{wall: time.Since(start)}
	if err != nil {
		return res, fmt.Errorf("enginemig apply: %v\n%s", err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.maxRSSKiB = ru.Maxrss
	}
	res.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var summary struct {
		Results []struct {
			CopyNs  int64 `json:"copy_ns"`
			IndexNs int64 `json:"index_build_ns"`
			Events  int64 `json:"replay_events"`
			Verify  struct {
				DurationNs    int64 `json:"duration_ns"`
				BehindRetries int   `json:"behind_retries"`
			} `json:"verify"`
			Cutover struct {
				LockHeld int64 `json:"lock_held_ns"`
			} `json:"cutover"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &summary); err != nil || len(summary.Results) != 1 {
		return res, fmt.Errorf("parse apply output: %v\n%s", err, out)
	}
	r := summary.Results[0]
	res.copySec, res.indexSec, res.events = float64(r.CopyNs)/1e9, float64(r.IndexNs)/1e9, r.Events
	res.verifySec, res.behindRetries = float64(r.Verify.DurationNs)/1e9, r.Verify.BehindRetries
	res.lockHeld = time.Duration(r.Cutover.LockHeld).Round(time.Millisecond)
	return res, nil
}

// longGap is the write gap applybench itemises (#15: the stall goal is 100 ms).
const longGap = 80 * time.Millisecond

type loadStats struct {
	qps         float64
	errors      int64
	maxWriteGap time.Duration
	longGaps    []string
	p99         time.Duration
}

// appMix is the application load: the production mix, on game.state's primary key.
var appMix = bench.WebMix()

// measure runs appMix on game.state with threads clients, paced to rate
// queries/s in total (0: as fast as possible), for d (0: until ctx ends).
func measure(ctx context.Context, db *sql.DB, threads int, rate float64, d time.Duration, rows int) loadStats {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var done, errs atomic.Int64
	var lastWrite atomic.Int64
	var gapMu sync.Mutex
	var maxGap time.Duration
	var long []string // write gaps over longGap, with when they ended: to match with apply's log
	lastWrite.Store(time.Now().UnixNano())
	lat := make([][]time.Duration, threads)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			var interval time.Duration
			if rate > 0 {
				interval = time.Duration(float64(time.Second) * float64(threads) / rate)
			}
			next := time.Now()
			for n := 0; ctx.Err() == nil; n++ {
				if interval > 0 {
					next = next.Add(interval)
					if w := time.Until(next); w > 0 {
						time.Sleep(w)
					}
				}
				id := 1 + r.IntN(rows)
				op := appMix.Draw(r)
				t0 := time.Now()
				err := query(context.WithoutCancel(ctx), db, r, op, id)
				now := time.Now()
				lat[i] = append(lat[i], now.Sub(t0))
				if err != nil {
					errs.Add(1)
					continue
				}
				done.Add(1)
				if op != bench.OpSelect {
					prev := time.Unix(0, lastWrite.Swap(now.UnixNano()))
					if g := now.Sub(prev); g > 0 {
						gapMu.Lock()
						maxGap = max(maxGap, g)
						if g > longGap {
							long = append(long, fmt.Sprintf("%s ended %s", g.Round(time.Millisecond), now.UTC().Format("15:04:05.000")))
						}
						gapMu.Unlock()
					}
				}
			}
		}(i)
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	st := loadStats{qps: float64(done.Load()) / time.Since(start).Seconds(), errors: errs.Load(), maxWriteGap: maxGap, longGaps: long}
	if len(all) > 0 {
		st.p99 = all[len(all)*99/100]
	}
	return st
}

// query runs one statement of the mix on row id (an INSERT adds a row instead).
func query(ctx context.Context, db *sql.DB, r *rand.Rand, op bench.Op, id int) error {
	switch op {
	case bench.OpSelect:
		var coins, level int
		return db.QueryRowContext(ctx, "SELECT coins, level FROM state WHERE id = ?", id).Scan(&coins, &level)
	case bench.OpUpdate:
		_, err := db.ExecContext(ctx, "UPDATE state SET coins = coins + 1 WHERE id = ?", id)
		return err
	case bench.OpInsert:
		if noAutoInc { // the application picks the key itself
			_, err := db.ExecContext(ctx, "INSERT INTO state (id, player, coins, level, score, name) VALUES (?, ?, 0, 1, 0, 'new')",
				nextID.Add(1), r.IntN(100000))
			return err
		}
		_, err := db.ExecContext(ctx, "INSERT INTO state (player, coins, level, score, name) VALUES (?, 0, 1, 0, 'new')", r.IntN(100000))
		return err
	}
	return fmt.Errorf("applybench: the mix has no statement for %s", op)
}

func numCPU() int { n, _ := strconv.Atoi(os.Getenv("NPROC")); return max(n, runtimeCPUs()) }
