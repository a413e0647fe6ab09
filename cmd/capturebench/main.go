// Command capturebench measures whether a gate's verdict with the captured mix matches the
// verdict of the true workload (results: docs/bench/measured.md, "Captured mix vs the true workload"). It
// is a measurement tool, not part of enginemig, and not run by the tests:
//
//  1. in a private sandbox, an application drives a known workload on game.players (PK reads and
//     writes, a range scan, a SUM report, an ORDER BY ... LIMIT, an IN list, a join) while
//     workload.FromDigests captures it over a window;
//  2. the true workload runs on full MyISAM and InnoDB copies at each thread count;
//  3. bench replays the captured mix on scratch copies at the same thread counts;
//
// and it prints both verdicts side by side (bench.Thresholds defaults).
//
//	go run ./cmd/capturebench -rows 100000 -duration 10s -threads 1,4,16,64
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/sandbox"
)

// statement is one of the application's statements: how often it is chosen, and its SQL.
type statement struct {
	weight int
	sql    func(r *rand.Rand, table string, rows int) string
}

// application is the true workload: weights per 63 statements.
var application = []statement{
	// The first two are the full-scan reports -app-reports=false leaves out.
	{1, func(r *rand.Rand, t string, n int) string {
		return fmt.Sprintf("SELECT SUM(coins) FROM %s WHERE level = %d", t, r.IntN(100))
	}},
	{1, func(r *rand.Rand, t string, n int) string {
		return fmt.Sprintf("SELECT id, name FROM %s ORDER BY coins DESC LIMIT 20", t)
	}},
	{40, func(r *rand.Rand, t string, n int) string {
		return fmt.Sprintf("SELECT id, level, coins FROM %s WHERE id = %d", t, 1+r.IntN(n))
	}},
	{10, func(r *rand.Rand, t string, n int) string {
		return fmt.Sprintf("UPDATE %s SET coins = coins + 1 WHERE id = %d", t, 1+r.IntN(n))
	}},
	{4, func(r *rand.Rand, t string, n int) string {
		return fmt.Sprintf("INSERT INTO %s (level, coins, guild, name) VALUES (%d, 5, %d, 'new')", t, r.IntN(100), r.IntN(5000))
	}},
	{2, func(r *rand.Rand, t string, n int) string {
		return fmt.Sprintf("DELETE FROM %s WHERE id = %d", t, 1+r.IntN(n))
	}},
	{2, func(r *rand.Rand, t string, n int) string {
		k := 1 + r.IntN(n-300)
		return fmt.Sprintf("SELECT id, coins FROM %s WHERE id BETWEEN %d AND %d", t, k, k+199)
	}},
	{2, func(r *rand.Rand, t string, n int) string {
		return fmt.Sprintf("SELECT p.name, g.gname FROM %s p JOIN guilds g ON g.id = p.guild WHERE p.id = %d", t, 1+r.IntN(n))
	}},
	{1, func(r *rand.Rand, t string, n int) string {
		k := 1 + r.IntN(n-10)
		return fmt.Sprintf("SELECT id FROM %s WHERE id IN (%d, %d, %d, %d, %d)", t, k, k+1, k+2, k+3, k+4)
	}},
}

// appReports keeps the two full-scan reports in the application's own mix.
var appReports = flag.Bool("app-reports", true, "the application's threads also run two full-scan reports (ORDER BY coins LIMIT, SUM WHERE level)")

// reportClient adds one client looping a full-table report to every run of the application.
var reportClient = flag.Bool("report-client", false, "add one client looping SELECT SUM(coins) over the whole table to the application (production and true-workload runs)")

func mix() []statement {
	if *appReports {
		return application
	}
	return application[2:]
}

func pick(r *rand.Rand) statement {
	total := 0
	for _, s := range mix() {
		total += s.weight
	}
	n := r.IntN(total)
	for _, s := range mix() {
		if n < s.weight {
			return s
		}
		n -= s.weight
	}
	return application[0]
}

// drive runs the application on table with threads clients until ctx ends, recording latencies
// of statements that start after from.
func drive(ctx context.Context, db *sql.DB, table string, rows, threads int, from time.Time) (*hdrhistogram.Histogram, int64) {
	if *reportClient {
		// The case the captured mix was made for: one client loops a report beside the
		// application's threads; its runs are not part of the measured totals (as bench's
		// --background).
		go func() {
			conn, err := db.Conn(ctx)
			if err != nil {
				return
			}
			defer conn.Close()
			for ctx.Err() == nil {
				conn.ExecContext(ctx, "SELECT SUM(coins) FROM "+table)
			}
		}()
	}
	var mu sync.Mutex
	total := hdrhistogram.New(1, 60_000_000, 3)
	var errs atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			h := hdrhistogram.New(1, 60_000_000, 3)
			r := rand.New(rand.NewPCG(seed, 99))
			conn, err := db.Conn(ctx)
			if err != nil {
				return
			}
			defer conn.Close()
			for ctx.Err() == nil {
				q := pick(r).sql(r, table, rows)
				began := time.Now()
				rs, err := conn.QueryContext(context.WithoutCancel(ctx), q)
				if err == nil {
					for rs.Next() {
					}
					err = rs.Close()
				}
				if ctx.Err() != nil {
					break
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				if began.After(from) {
					h.RecordValue(time.Since(began).Microseconds())
				}
			}
			mu.Lock()
			total.Merge(h)
			mu.Unlock()
		}(uint64(i))
	}
	wg.Wait()
	return total, errs.Load()
}

func main() {
	rows := flag.Int("rows", 100000, "rows in the table")
	duration := flag.Duration("duration", 10*time.Second, "measured time per step and side")
	warmup := flag.Duration("warmup", 2*time.Second, "unmeasured time before each step")
	observe := flag.Duration("observe", 15*time.Second, "capture window")
	threadsFlag := flag.String("threads", "1,4,16,64", "thread counts")
	mixOut := flag.String("save-mix", "", "write the captured mix here")
	reportRows := flag.Int64("report-rows", 0, "also replay the captured mix with bench.Config.ReportRows (0: weighted only)")
	extra := flag.String("server-args", "", "extra mariadbd arguments, space-separated (e.g. --innodb-flush-log-at-trx-commit=2)")
	flag.Parse()
	var threads []int
	for _, p := range strings.Split(*threadsFlag, ",") {
		n, err := strconv.Atoi(p)
		if err != nil {
			log.Fatal(err)
		}
		threads = append(threads, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := sandbox.Start(ctx, sandbox.Options{BufferPool: "1G", ExtraArgs: append([]string{"--key-buffer-size=256M", "--max-connections=1000"}, strings.Fields(*extra)...)})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	root, err := srv.Open("")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := root.ExecContext(ctx, "CREATE DATABASE game"); err != nil {
		log.Fatal(err)
	}
	root.Close()
	db, err := srv.Open("game")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(0)
	if err := seed(ctx, db, *rows); err != nil {
		log.Fatal(err)
	}

	// 1. Production: 8 clients run the application while the capture observes.
	appCtx, appStop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { drive(appCtx, db, "players", *rows, 8, time.Now()); close(done) }()
	time.Sleep(time.Second)
	c, err := workload.FromDigests(ctx, db, "game", "players", *observe)
	appStop()
	<-done
	if err != nil {
		log.Fatal(err)
	}
	if *mixOut != "" {
		if err := c.Save(*mixOut); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("captured %d statements from %s", len(c.Statements), c.Source)

	// 2. The true workload on full copies.
	truth := measureTruth(ctx, db, *rows, threads, *warmup, *duration)

	// 3. The captured mix, replayed by bench on scratch copies of the whole table (weighted, and
	// with -report-rows also with reports as background loops); 4. for contrast, what the gate ran
	// before the captured mix: the primary-key mix alone.
	run := func(name string, cfg bench.Config) named {
		cfg.Threads, cfg.Duration, cfg.Warmup = threads, *duration, *warmup
		cfg.Progress = func(s string) { log.Print(name, " ", s) }
		rep, err := bench.Run(ctx, db, bench.Options{Mode: bench.ModeScratch, Schema: "game", Table: "players", SampleRows: 2 * *rows, Config: cfg})
		if err != nil {
			log.Fatal(err)
		}
		rep.WriteText(os.Stdout)
		return named{name, rep}
	}
	reps := []named{run("captured mix, weighted", bench.Config{Captured: c})}
	if *reportRows > 0 {
		reps = append(reps, run(fmt.Sprintf("captured mix, --report-rows %d", *reportRows), bench.Config{Captured: c, ReportRows: *reportRows}))
	}
	reps = append(reps, run("PK mix 16:7:1", bench.Config{Mix: bench.DefaultMix()}))
	report(threads, truth, reps)
}

// measureTruth runs the application's true workload on full MyISAM and InnoDB copies of the
// table at each thread count, alternating which goes first.
func measureTruth(ctx context.Context, db *sql.DB, rows int, threads []int, warmup, duration time.Duration) map[string]map[int]bench.Stats {
	for _, q := range []string{
		"CREATE TABLE players_myisam LIKE players", "INSERT INTO players_myisam SELECT * FROM players",
		"CREATE TABLE players_innodb LIKE players", "ALTER TABLE players_innodb ENGINE=InnoDB", "INSERT INTO players_innodb SELECT * FROM players",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			log.Fatalf("%s: %v", q, err)
		}
	}
	truth := map[string]map[int]bench.Stats{"players_myisam": {}, "players_innodb": {}}
	for i, n := range threads {
		order := []string{"players_myisam", "players_innodb"}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, t := range order {
			stepCtx, cancel := context.WithTimeout(ctx, warmup+duration)
			h, errs := drive(stepCtx, db, t, rows, n, time.Now().Add(warmup))
			cancel()
			st := bench.Stats{Count: h.TotalCount(), QPS: float64(h.TotalCount()) / duration.Seconds(),
				P99: float64(h.ValueAtQuantile(99)) / 1000, Errors: errs}
			truth[t][n] = st
			log.Printf("true workload %s threads=%d qps=%.0f p99=%.2fms errors=%d", t, n, st.QPS, st.P99, errs)
		}
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE players_myisam, players_innodb"); err != nil {
		log.Fatal(err)
	}
	return truth
}

type named struct {
	name string
	rep  bench.Report
}

// report prints the verdicts side by side: per thread count, the true workload and each replay.
func report(threads []int, truth map[string]map[int]bench.Stats, reps []named) {
	th := bench.DefaultThresholds()
	var tb, ta bench.Result
	tb.Label, ta.Label = "MyISAM", "InnoDB"
	for _, n := range threads {
		tb.Steps = append(tb.Steps, bench.Step{Threads: n, Total: truth["players_myisam"][n]})
		ta.Steps = append(ta.Steps, bench.Step{Threads: n, Total: truth["players_innodb"][n]})
	}
	verdicts := []bench.GateResult{th.Judge(tb, ta)}
	names := []string{"true workload"}
	for _, r := range reps {
		verdicts = append(verdicts, th.Judge(r.rep.Results[0], r.rep.Results[1]))
		names = append(names, r.name)
	}
	fmt.Printf("\n%7s  %-32s %10s %9s %10s %9s  %s\n", "threads", "run", "MyISAM q/s", "p99 ms", "InnoDB q/s", "p99 ms", "verdict")
	for i, n := range threads {
		for k, v := range verdicts {
			st := v.Steps[i]
			fmt.Printf("%7d  %-32s %10.0f %9.2f %10.0f %9.2f  %s\n", n, names[k], st.Before.QPS, st.Before.P99, st.After.QPS, st.After.P99, pass(st.Pass))
		}
	}
}

func pass(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func seed(ctx context.Context, db *sql.DB, rows int) error {
	for _, q := range []string{
		"CREATE TABLE players (id INT UNSIGNED NOT NULL AUTO_INCREMENT, level INT NOT NULL, coins INT NOT NULL, " +
			"guild INT NOT NULL, name CHAR(40) NOT NULL, PRIMARY KEY (id), KEY guild (guild)) ENGINE=MyISAM",
		fmt.Sprintf("INSERT INTO players (level, coins, guild, name) SELECT seq %% 100, (seq * 7919) %% 100000, seq %% 5000, "+
			"CONCAT('player-', seq) FROM seq_1_to_%d", rows),
		"CREATE TABLE guilds (id INT NOT NULL PRIMARY KEY, gname CHAR(20) NOT NULL) ENGINE=MyISAM",
		"INSERT INTO guilds SELECT seq - 1, CONCAT('guild', seq) FROM seq_1_to_5000",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}
