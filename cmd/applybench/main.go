// Command applybench measures enginemig apply against native ALTER TABLE ... ENGINE=InnoDB (and, when
// asked, pt-online-schema-change and gh-ost) on the same game-state table in one run, idle and under
// an application load paced on a fixed grid of start slots (bench/arrival), and prints the
// application's throughput per stage of the conversion: the mean and the worst second. -forum
// measures a forum's posts, with a FULLTEXT index, under a forum's traffic instead (forum.go).
//
//	go run ./cmd/applybench -rows 1000000 -no-autoinc -loads 0.25,0.5,0.75 -pt-osc -gh-ost /work/bin/gh-ost
//	go run ./cmd/applybench -forum -rows 1000000 -loads 0.5 -pt-osc -gh-ost /work/bin/gh-ost
//
// It starts its own sandbox server and builds enginemig; nothing else is touched.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	rows := flag.Int("rows", 2_000_000, "rows in the game-state table (with -forum, posts)")
	forumShape := flag.Bool("forum", false, "seed a forum's posts instead of the game-state table: posts with about 40 words of text each and a FULLTEXT index on (subject, body), under a forum's traffic ("+forumMixText+": reads by id, boolean FULLTEXT searches, likes, new posts); pt-online-schema-change and gh-ost accept the table (gh-ost does not refuse a FULLTEXT index); not with -keyless, -keyless-ts, -grown or -capture-cost, which shape or measure the game table")
	threads := flag.Int("threads", 16, "application threads for the loaded runs")
	loadShare := flag.Float64("load", 0.5, "application load as a share of measured capacity (see -loads)")
	loads := flag.String("loads", "", "comma-separated load shares, each measured for every tool in turn (e.g. 0.25,0.5,0.75); overrides -load")
	window := flag.Duration("window", 5*time.Second, "capacity and baseline measurement window")
	skipLoad := flag.Bool("idle-only", false, "skip the runs under load")
	flag.StringVar(&serverArgs, "server-args", "", "extra mariadbd arguments for the sandbox, space separated (e.g. \"--innodb-log-file-size=1G\")")
	flag.StringVar(&compareBin, "compare-bin", "", "older enginemig binaries, comma-separated, to measure in the same run on identical tables (one: before/after; several: each by its file name, then after)")
	flag.StringVar(&extraApplyArgs, "apply-args", "", "extra arguments for enginemig apply, space separated (e.g. \"--chunk-time 50ms\")")
	flag.StringVar(&binlogFormat, "binlog-format", "ROW", "the sandbox's binlog: ROW, STATEMENT, MIXED or OFF (apply's --capture auto then chooses triggers)")
	flag.BoolVar(&withPTOSC, "pt-osc", false, "also measure pt-online-schema-change --alter ENGINE=InnoDB")
	flag.StringVar(&ghostBin, "gh-ost", "", "also measure this gh-ost binary (--alter ENGINE=InnoDB; needs -binlog-format ROW; docs/bench/applybench.md says how to build it)")
	flag.StringVar(&ghostArgs, "gh-ost-args", "", "extra arguments for gh-ost, space separated (e.g. \"--max-load Threads_running=30\")")
	flag.BoolVar(&skipNative, "no-native", false, "skip native ALTER under load")
	flag.BoolVar(&loadOnly, "load-only", false, "skip the idle runs")
	flag.BoolVar(&keyless, "keyless", false, "seed the table without a unique key: id keeps a non-unique index the load's statements use (no AUTO_INCREMENT; gh-ost and pt-online-schema-change refuse such tables)")
	flag.BoolVar(&keylessTS, "keyless-ts", false, "with -keyless: the table also has ts DATETIME(6) (ten rows a second, the load's inserts take the time of day) and KEY ts (ts, player), the index the copy walks (seeding ends with ANALYZE TABLE: its statistics then rate it as distinct as id's, and it has more columns)")
	flag.BoolVar(&grown, "grown", false, "seed the table with dynamic rows (name VARCHAR(60)) and then lengthen every other row, as years of UPDATEs leave a MyISAM table: its rows split into pieces, which a scan (native ALTER's) and a read by key (enginemig's) both read apart")
	flag.BoolVar(&noAutoInc, "no-autoinc", false, "seed the table without AUTO_INCREMENT on its key (copy chunks can then run in parallel: copier/parallel.go)")
	flag.DurationVar(&holdCutover, "hold-cutover", 0, "postpone enginemig's cut-over for this long after verification: the application's throughput with only change capture running (stage \"postponed\")")
	flag.IntVar(&repeat, "repeat", 1, "run every tool this many times at each load level, in turn, and print each one's medians: one run per build cannot show a change smaller than the run-to-run spread")
	flag.BoolVar(&withControl, "control", false, "after the tools at each load level, run the load alone for as long as enginemig took: what the application keeps with no conversion at all, the floor the other figures stand on")
	flag.StringVar(&jsonOut, "json", "", "also write every run under load to this file as JSON (docs/bench/applybench.md says what each field means)")
	flag.BoolVar(&costOnly, "capture-cost", false, "only measure what trigger capture adds to a single-row UPDATE, then exit")
	flag.Parse()
	if keyless && (withPTOSC || ghostBin != "") {
		fmt.Fprintln(os.Stderr, "applybench: -keyless: gh-ost and pt-online-schema-change refuse tables without a unique key; measure native ALTER beside enginemig")
		os.Exit(2)
	}
	if keylessTS && !keyless {
		fmt.Fprintln(os.Stderr, "applybench: -keyless-ts goes with -keyless")
		os.Exit(2)
	}
	if *forumShape && (keyless || keylessTS || grown || costOnly) {
		fmt.Fprintln(os.Stderr, "applybench: -forum: -keyless, -keyless-ts, -grown and -capture-cost are the game table's")
		os.Exit(2)
	}
	noAutoInc = noAutoInc || keyless // the load's INSERTs pick their ids
	var sh shape = newGameShape()
	if *forumShape {
		sh = newForumShape()
	}
	shares := []float64{*loadShare}
	if *loads != "" {
		shares = nil
		for _, f := range strings.Split(*loads, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v <= 0 || v > 1 {
				fmt.Fprintf(os.Stderr, "applybench: -loads: %q is not a share between 0 and 1\n", f)
				os.Exit(2)
			}
			shares = append(shares, v)
		}
	}
	ctx := context.Background()
	if err := run(ctx, sh, *rows, *threads, shares, *window, *skipLoad); err != nil {
		fmt.Fprintln(os.Stderr, "applybench:", err)
		os.Exit(1)
	}
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
	// verifyChunks and where verification's time went: taking its locks, holding them, and on
	// the target after letting the source go (the rest of its time is mostly the pace's rests).
	verifyChunks                        int
	verifyWait, verifyHeld, verifyAfter time.Duration
	stages                              []stageMark // when each stage began, from apply's control socket
}

var extraApplyArgs, serverArgs, binlogFormat string
var withPTOSC, costOnly, noAutoInc, loadOnly, keyless, keylessTS, grown bool
var holdCutover time.Duration

// serverPid is the sandbox server's process; idleWork is each build's CPU (server and
// enginemig) for the idle conversion, which the loaded runs print beside the load's.
var serverPid int
var idleWork = map[string]time.Duration{}

// runApply converts the table with enginemig apply, watching its stages on its control socket.
func runApply(ctx context.Context, bin string, port int, table string) (applyResult, error) {
	dir, err := os.MkdirTemp("", "applybench")
	if err != nil {
		return applyResult{}, err
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "control.sock")
	args := []string{"apply", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--user", "root",
		"--ssl-mode", "DISABLED", "--database", "game", "--table", table, "--output", "json", "--no-progress",
		"--control-socket", socket}
	var watch stageWatch
	if holdCutover > 0 {
		hold := filepath.Join(dir, "postpone")
		if err := os.WriteFile(hold, nil, 0o600); err != nil {
			return applyResult{}, err
		}
		args = append(args, "--postpone-cutover-file", hold)
		watch.onStage = func(stage string) {
			if stage == "postponed" {
				time.AfterFunc(holdCutover, func() { os.Remove(hold) })
			}
		}
	}
	args = append(args, strings.Fields(extraApplyArgs)...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME=/nonexistent")
	cmd.Stderr = os.Stderr
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); watch.poll(watchCtx, socket) }()
	start := time.Now()
	out, err := cmd.Output()
	res := applyResult{wall: time.Since(start)}
	stopWatch()
	<-watched
	res.stages = watch.list()
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
			Events  int64 `json:"capture_changes"`
			Older   int64 `json:"replay_events"` // the same count, as binaries before capture_changes named it
			Verify  struct {
				DurationNs    int64 `json:"duration_ns"`
				BehindRetries int   `json:"behind_retries"`
				Chunks        int   `json:"chunks"`
				LockNs        int64 `json:"lock_ns"`
				LockWaitNs    int64 `json:"lock_wait_ns"`
				AfterNs       int64 `json:"after_release_ns"`
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
	res.copySec, res.indexSec, res.events = float64(r.CopyNs)/1e9, float64(r.IndexNs)/1e9, max(r.Events, r.Older)
	res.verifySec, res.behindRetries = float64(r.Verify.DurationNs)/1e9, r.Verify.BehindRetries
	res.verifyChunks = r.Verify.Chunks
	res.verifyWait, res.verifyHeld, res.verifyAfter = time.Duration(r.Verify.LockWaitNs), time.Duration(r.Verify.LockNs), time.Duration(r.Verify.AfterNs)
	res.lockHeld = time.Duration(r.Cutover.LockHeld).Round(time.Millisecond)
	return res, nil
}

func numCPU() int { n, _ := strconv.Atoi(os.Getenv("NPROC")); return max(n, runtimeCPUs()) }
