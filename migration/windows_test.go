package migration

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/window"
)

// spans is a schedule in local time of spans given as offsets from base, to the second: the
// windows of these tests open and close seconds from now.
func spans(t *testing.T, base time.Time, offsets ...time.Duration) *window.Schedule {
	t.Helper()
	var specs []string
	for i := 0; i+1 < len(offsets); i += 2 {
		specs = append(specs, base.Add(offsets[i]).Format("15:04:05")+"-"+base.Add(offsets[i+1]).Format("15:04:05"))
	}
	w, err := window.Parse(specs, time.Local, "local")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// logTime is when the first log record with msg was written.
func logTime(t *testing.T, logs *logLines, msg string) time.Time {
	t.Helper()
	m := regexp.MustCompile(`time=(\S+) level=\w+ msg="?` + regexp.QuoteMeta(msg)).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no %q in the log:\n%s", msg, logs)
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// The copy waits for its window (throttle reason window, shown by the control socket and the
// metrics) with the application writing, copies nothing before it opens, then runs to the end
// with no acknowledged write lost.
func TestCopyWindowPausesTheCopyUntilItOpens(t *testing.T) {
	schema, db, l, stop := blockedLoad(t)
	defer stop()
	opts := testOptions(srv, schema, "t")
	logs := &logLines{}
	opts.Logger = logs.logger()
	base := time.Now().Truncate(time.Second)
	opens := base.Add(5 * time.Second)
	opts.CopyWindow = spans(t, base, 5*time.Second, time.Hour)
	opts.ControlSocket = filepath.Join(t.TempDir(), "ctl.sock")
	opts.MetricsListen = "127.0.0.1:0"
	addr := make(chan string, 1)
	opts.MetricsAddr = func(a string) { addr <- a }
	var mu sync.Mutex
	var copiedBefore int64
	sawCopy := false
	opts.Progress = func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Stage == state.StageCopy && time.Now().Before(opens) {
			sawCopy, copiedBefore = true, max(copiedBefore, p.RowsCopied)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), db, opts); done <- err }()
	url := "http://" + <-addr + "/metrics"
	body := scrapeUntil(t, url, `reason="outside the window`)
	if v, _ := metricValue(body, `enginemig_throttled{`); v != 1 {
		t.Errorf("throttled gauge %v while outside the window:\n%s", v, body)
	}
	reply, err := control.Send(context.Background(), opts.ControlSocket, "status")
	if err != nil || !strings.Contains(reply, `"reason":"outside the window`) || !strings.Contains(reply, "(local time)") {
		t.Errorf("control status outside the window: %v\n%s", err, reply)
	}
	if err := <-done; err != nil {
		t.Fatalf("apply: %v\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), `msg="copy throttled" reason="outside the window`) {
		t.Errorf("no throttle reason window in the log:\n%s", logs)
	}
	if resumed := logTime(t, logs, "copy resumed"); resumed.Before(opens) || resumed.After(opens.Add(2*time.Second)) {
		t.Errorf("the copy resumed at %s; the window opened at %s", resumed.Format("15:04:05.000"), opens.Format("15:04:05"))
	}
	mu.Lock()
	if !sawCopy || copiedBefore != 0 {
		t.Errorf("before the window opened: progress in the copy seen %v, rows copied %d; want seen and 0", sawCopy, copiedBefore)
	}
	mu.Unlock()
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("t is not InnoDB")
	}
	checkAcked(t, db, l, stop, schema)
}

// heldUntil is a hook that, when the cut-over is about to start, makes w the schedule given by
// offsets from then (the tests' windows open relative to the end of the copy, which they cannot
// know in advance), runs also, and reports then.
func heldUntil(w *window.Schedule, t *testing.T, at chan<- time.Time, also func(), offsets ...time.Duration) func(context.Context, Point, *state.State) error {
	return func(_ context.Context, p Point, _ *state.State) error {
		if p == Before(state.StageCutover) {
			now := time.Now()
			*w = *spans(t, now.Truncate(time.Second), offsets...)
			if also != nil {
				also()
			}
			at <- now
		}
		return nil
	}
}

// A finished shadow waits, kept current under the application's writes, until its cut-over
// window opens; the swap happens inside it.
func TestCutoverWindowHoldsTheSwapUntilItOpens(t *testing.T) {
	schema, db, l, stop := blockedLoad(t)
	defer stop()
	opts := testOptions(srv, schema, "t")
	logs := &logLines{}
	opts.Logger = logs.logger()
	opts.CutoverWindow = spans(t, time.Now(), time.Hour, 2*time.Hour) // set when the copy is done
	ready := make(chan time.Time, 1)
	opts.Hook = heldUntil(opts.CutoverWindow, t, ready, nil, 5*time.Second, time.Minute)
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, logs)
	}
	base := (<-ready).Truncate(time.Second)
	opens, closes := base.Add(5*time.Second), base.Add(time.Minute)
	held, swapped := logTime(t, logs, "cut-over held until its window opens"), logTime(t, logs, "cut-over done")
	if held.After(opens) || swapped.Before(opens) || swapped.After(closes) {
		t.Errorf("held at %s, swapped at %s: want held before %s and swapped between it and %s\n%s", held.Format("15:04:05.000"),
			swapped.Format("15:04:05.000"), opens.Format("15:04:05"), closes.Format("15:04:05"), logs)
	}
	if !strings.Contains(logs.String(), `msg="waiting: window"`) || res.CaptureChanges == 0 {
		t.Errorf("no window wait in the log, or nothing replayed (%d changes):\n%s", res.CaptureChanges, logs)
	}
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("t is not InnoDB")
	}
	checkAcked(t, db, l, stop, schema)
}

// The window closes while a LOCK TABLES ... READ keeps every attempt out: the attempts stop at
// the close with the original in place (MyISAM while the window is shut), and the swap goes
// through when the window opens again, the lock gone meanwhile.
func TestCutoverWindowClosingStopsAttemptsUntilTheNextOpening(t *testing.T) {
	schema, db, l, stop := blockedLoad(t)
	defer stop()
	opts := testOptions(srv, schema, "t")
	logs := &logLines{}
	opts.Logger = logs.logger()
	opts.CutoverWindow = spans(t, time.Now(), time.Hour, 2*time.Hour)
	var unlock func()
	ready := make(chan time.Time, 1)
	lock := func() {
		_, unlock = holdTable(t, db, "LOCK TABLES "+dbconn.QualifiedName(schema, "t")+" READ")
		time.Sleep(300 * time.Millisecond) // granted before the first attempt
	}
	opts.Hook = heldUntil(opts.CutoverWindow, t, ready, lock, -time.Second, 3*time.Second, 6*time.Second, time.Minute)
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), db, opts); done <- err }()
	base := (<-ready).Truncate(time.Second)
	waitForLog(t, logs, "cut-over window closed", 30*time.Second)
	if closedAt := logTime(t, logs, "cut-over window closed"); closedAt.Before(base.Add(3 * time.Second)) {
		t.Errorf("attempts stopped at %s, before the window closed at %s", closedAt.Format("15:04:05.000"), base.Add(3*time.Second).Format("15:04:05"))
	}
	if engine := engineOf(t, db, schema, "t"); engine != "MyISAM" || time.Now().After(base.Add(6*time.Second)) {
		t.Fatalf("while the window is shut: t is %s (checked at %s, it reopens at %s)", engine, time.Now().Format("15:04:05.000"), base.Add(6*time.Second).Format("15:04:05"))
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("apply: %v\n%s", err, logs)
	}
	out := logs.String()
	if !strings.Contains(out, "cut-over attempt failed") || strings.Count(out, "cut-over held until its window opens") != 1 {
		t.Errorf("want failed attempts in the first opening and one hold until the second:\n%s", out)
	}
	if swapped := logTime(t, logs, "cut-over done"); swapped.Before(base.Add(6 * time.Second)) {
		t.Errorf("swapped at %s, before the second opening at %s", swapped.Format("15:04:05.000"), base.Add(6*time.Second).Format("15:04:05"))
	}
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("t is not InnoDB")
	}
	checkAcked(t, db, l, stop, schema)
}

// The run's ETA with a copy window is wall time: what is left of the copy is done only while the
// window is open (here one hour a night), verification after it whenever.
func TestRunETAWithACopyWindow(t *testing.T) {
	w, err := window.Parse([]string{"daily 01:00-02:00"}, time.UTC, "UTC")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 1, 30, 0, 0, time.UTC)
	clock := stageClock{window: w}
	clock.fill(&Progress{Stage: state.StageCopy, RowsTotal: 10000}, 0, copier.WalkStats{}, verifyCost{}, now.Add(-time.Hour)) // 00:30: the stage begins, closed
	p := Progress{Stage: state.StageCopy, RowsCopied: 1800, RowsTotal: 10000}
	clock.fill(&p, 0, copier.WalkStats{}, verifyCost{}, now)
	// 1800 rows in the 30 open minutes: 1 row/s. 8200 s of copy left: 30 min tonight, 60 min the
	// next night, and 46 min 40 s the night after (01:46:40 on the 9th).
	if p.StageRate != 1 {
		t.Fatalf("rate %v rows/s: want 1, counted over the open time only", p.StageRate)
	}
	copyEnd := time.Date(2026, 12, 9, 1, 46, 40, 0, time.UTC)
	if want := copyEnd.Sub(now); p.StageETA != want {
		t.Errorf("copy ETA %s, want %s", p.StageETA, want)
	}
	if want := copyEnd.Sub(now) + 10000*time.Second; p.RunETA != want { // verification as long as the copy, outside the window too
		t.Errorf("run ETA %s, want %s", p.RunETA, want)
	}
	if got := windowedETA(nil, now, time.Minute); got != time.Minute {
		t.Errorf("no window: %s", got)
	}
}
