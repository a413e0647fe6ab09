package migration

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/state"
)

// A postponed cut-over is released through the control socket; status answers meanwhile.
func TestControlSocketReleasesPostponedCutover(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(2000))
	dir := t.TempDir()
	opts := testOptions(srv, schema, "t")
	opts.ControlSocket = filepath.Join(dir, "ctl.sock")
	opts.PostponeFile = filepath.Join(dir, "postpone")
	os.WriteFile(opts.PostponeFile, nil, 0o600)
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), db, opts); done <- err }()

	waitForStage(t, opts.ControlSocket, state.StagePostponed)
	statusReadsServerAtMostOnceASecond(t, db, opts.ControlSocket)
	if _, err := control.Send(context.Background(), opts.ControlSocket, "release-cutover"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("release did not let the cut-over proceed")
	}
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("not converted")
	}
}

func TestControlSocketAbortLeavesOriginal(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(2000))
	dir := t.TempDir()
	opts := testOptions(srv, schema, "t")
	opts.StateSchema = "_state_abort"
	opts.ControlSocket = filepath.Join(dir, "ctl.sock")
	opts.PostponeFile = filepath.Join(dir, "postpone")
	os.WriteFile(opts.PostponeFile, nil, 0o600)
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), db, opts); done <- err }()
	waitForStage(t, opts.ControlSocket, state.StagePostponed)
	control.Send(context.Background(), opts.ControlSocket, "abort")
	err := <-done
	if outcome.CodeOf(err) != outcome.FailedSafe || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("got %d %v", outcome.CodeOf(err), err)
	}
	if tableExists(t, db, schema, "_t_new") || engineOf(t, db, schema, "t") != "MyISAM" {
		t.Fatal("abort left changes")
	}
}

// waitForStage polls the control socket's status until the migration reaches stage.
// statusReadsServerAtMostOnceASecond polls status 40 times in half a second, as a dashboard or
// applybench may, and checks the server was asked for its binlog position no more than twice
// beyond what the migration asks on its own in the same time.
func statusReadsServerAtMostOnceASecond(t *testing.T, db *sql.DB, socket string) {
	t.Helper()
	positionReads := func() int64 {
		var sum int64
		rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_show_master_status', 'Com_show_binlog_status', 'Com_show_binary_log_status')")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			sum += n
		}
		return sum
	}
	before := positionReads()
	time.Sleep(500 * time.Millisecond)
	quiet := positionReads()
	for range 40 {
		if _, err := control.Send(context.Background(), socket, "status"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(12 * time.Millisecond)
	}
	polled := positionReads()
	if own, extra := quiet-before, polled-quiet-(quiet-before); extra > 2 {
		t.Errorf("40 status polls in half a second read the server's position %d times beyond the migration's own %d", extra, own)
	}
}

func waitForStage(t *testing.T, socket string, stage state.Stage) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		reply, err := control.Send(context.Background(), socket, "status")
		if err == nil && strings.Contains(reply, `"stage":"`+stage.String()+`"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never reached %s; last status %q %v", stage, reply, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A postponed cut-over proceeds on its own at the deadline, with the flag file still there.
func TestPostponedCutoverReleasedAtDeadline(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(2000))
	opts := testOptions(srv, schema, "t")
	opts.PostponeFile = filepath.Join(t.TempDir(), "postpone")
	os.WriteFile(opts.PostponeFile, nil, 0o600)
	opts.PostponeUntil = time.Now().Add(2 * time.Second)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // an ignored deadline fails, not hangs
	defer cancel()
	if _, err := Run(ctx, db, opts); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 2*time.Second {
		t.Fatalf("cut over after %s, before the postpone deadline", time.Since(start))
	}
	if _, err := os.Stat(opts.PostponeFile); err != nil || engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("not converted at the deadline (or the flag file was touched)")
	}
}

// The metrics endpoint is scraped while the migration waits postponed: it shows the stage, the
// copy's figures and the wait, labelled with the table; a change replayed slowly (a test's hook
// delays each replay batch 1.5 s) shows as replay lag in seconds; after the swap, the cut-over's
// attempts and lock time.
func TestMetricsScrapedDuringMigration(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(3000))
	opts := testOptions(srv, schema, "t")
	opts.PostponeFile = filepath.Join(t.TempDir(), "hold")
	os.WriteFile(opts.PostponeFile, nil, 0o600)
	opts.MetricsListen = "127.0.0.1:0"
	addr := make(chan string, 1)
	opts.MetricsAddr = func(a string) { addr <- a }
	opts.ProgressEvery = 50 * time.Millisecond
	ctx := withHooks(context.Background(), faults.Hooks{ReplayDelay: 1500 * time.Millisecond})
	var served atomic.Value
	var afterSwap string
	opts.Hook = func(ctx context.Context, at Point, st *state.State) error {
		if at == PointSuccess {
			afterSwap = scrape(t, served.Load().(string))
		}
		return nil
	}
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = Run(ctx, db, opts)
		done <- err
	}()
	url := "http://" + <-addr + "/metrics"
	served.Store(url)
	// The stage turns "postponed" a moment before the wait is registered: wait for the wait.
	body := scrapeUntil(t, url, `enginemig_blocked{on="postponed",schema=`)
	if !strings.Contains(body, `stage="postponed"`) {
		t.Errorf("the postponed wait is not in stage postponed:\n%s", body)
	}
	sandboxtest.MustExec(t, sdb, "INSERT INTO t VALUES (5000, 1)")
	lagged := scrapeUntil(t, url, "enginemig_capture_lag_seconds{", func(v float64) bool { return v >= 1 })
	os.Remove(opts.PostponeFile)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`enginemig_rows_copied{schema=%q,table="t"} 3000`, schema)
	if !strings.Contains(body, want) || !strings.Contains(body, "enginemig_capture_changes{") || !strings.Contains(body, "# HELP enginemig_stage ") {
		t.Fatalf("metrics lack %q:\n%s", want, body)
	}
	if !strings.Contains(lagged, "enginemig_capture_lag_bytes{") {
		t.Errorf("no replay lag in bytes:\n%s", lagged)
	}
	// The pace runs until the cut-over: its latency target (4 ms at least) and measured p99 are
	// served while the cut-over waits, and the result has them over the run.
	if v, ok := metricValue(body, "enginemig_pace_latency_target_seconds{"); !ok || v < 0.004 {
		t.Errorf("latency target while postponed: %v s (found %v), want 0.004 or more", v, ok)
	}
	if v, ok := metricValue(body, "enginemig_pace_latency_p99_seconds{"); !ok || v <= 0 {
		t.Errorf("measured latency p99 while postponed: %v s (found %v), want it measured", v, ok)
	}
	if p := res.Pace; p == nil || p.Target < 0.004 || p.Reads == 0 || p.P99 <= 0 || p.Source != "probe" {
		t.Errorf("the result's latency figures: %+v, want the target, the reads and their p99", p)
	}
	if v, ok := metricValue(afterSwap, "enginemig_cutover_attempts_total{"); !ok || v != 1 {
		t.Errorf("cut-over attempts after the swap: %v (found %v); want 1:\n%s", v, ok, afterSwap)
	}
	if v, ok := metricValue(afterSwap, "enginemig_cutover_lock_seconds{"); !ok || v <= 0 || v > 5 {
		t.Errorf("cut-over lock time after the swap: %v s (found %v)", v, ok)
	}
}

func scrape(t *testing.T, url string) string {
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("scrape %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// scrapeUntil scrapes until a line starting with prefix appears (and, given a condition, its
// value meets it), for at most 30 s.
func scrapeUntil(t *testing.T, url, prefix string, cond ...func(float64) bool) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			v, found := metricValue(body, prefix)
			if found && (len(cond) == 0 || cond[0](v)) {
				return body
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s in the metrics:\n%s", prefix, body)
		}
	}
}

// metricValue finds the first sample whose line contains prefix (or, for a label, the label).
func metricValue(body, prefix string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") || !strings.Contains(line, prefix) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
			return v, true
		}
	}
	return 0, false
}
