package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
)

// blockedLoad seeds t with an application load that checks itself and starts it.
func blockedLoad(t *testing.T) (string, *sql.DB, *ackload.Load, func()) {
	t.Helper()
	schema, _ := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	db.SetMaxOpenConns(30)
	l, err := ackload.Create(context.Background(), db, schema, "t", ackload.Config{Writers: 3, RowsPerWriter: 2000, Pause: 300 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	return schema, db, l, l.Start()
}

// checkAcked stops the load and compares the table with every acknowledged write.
func checkAcked(t *testing.T, db *sql.DB, l *ackload.Load, stop func(), schema string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	stop()
	st := l.Stats()
	if st.Errors > 0 || st.Stale > 0 {
		t.Errorf("application saw %d errors, %d stale reads: %s", st.Errors, st.Stale, strings.Join(l.Problems(5), "; "))
	}
	checked, diffs, err := l.Check(context.Background(), db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("lost or wrong writes:\n%s", strings.Join(diffs, "\n"))
	}
	t.Logf("%d writes and %d reads acknowledged, %d rows identical", st.Acked, st.Reads, checked)
}

// reportUnderLock takes LOCK TABLES qt READ on a session of its own, then runs a long report on
// qt in that same session, under the lock it holds: a report sent on another session would queue
// for the table behind the application's writes, which wait for that READ lock (seen in CI: the
// report never ran). endReport ends the report and keeps the lock; unlock releases it (also
// when the test ends).
func reportUnderLock(t *testing.T, db *sql.DB, qt string) (id int64, endReport, unlock func()) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id)
	if _, err := conn.ExecContext(context.Background(), "LOCK TABLES "+qt+" READ"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn.ExecContext(context.Background(), "SELECT COUNT(*) FROM "+qt+" WHERE SLEEP(0.001) = 0")
	}()
	var ended, released sync.Once
	endReport = func() {
		ended.Do(func() {
			db.Exec(fmt.Sprintf("KILL QUERY %d", id))
			<-done
		})
	}
	unlock = func() {
		released.Do(func() {
			endReport()
			conn.ExecContext(context.Background(), "UNLOCK TABLES")
			conn.Close()
		})
	}
	t.Cleanup(unlock)
	return id, endReport, unlock
}

// holdTable runs stmt (a report, LOCK TABLES ... READ) on a session of its own until release, or
// until the test ends.
func holdTable(t *testing.T, db *sql.DB, stmt string) (id int64, release func()) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id)
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn.ExecContext(context.Background(), stmt)
	}()
	var once sync.Once
	release = func() {
		once.Do(func() {
			db.Exec(fmt.Sprintf("KILL QUERY %d", id))
			<-done
			conn.ExecContext(context.Background(), "UNLOCK TABLES")
			conn.Close()
		})
	}
	// A test that fails while the table is held must not leave it held: the database's DROP at
	// the end would wait for it until go test's timeout.
	t.Cleanup(release)
	return id, release
}

// A report on the table, then a LOCK TABLES ... READ, keep the swap out for longer than the old
// give-up time (30 attempts × the backoff): apply keeps the shadow current, says what blocks it
// (the report by its connection, then the failed attempts as a wait of kind cutover), and swaps
// once it can, with no acknowledged write lost.
func TestCutoverWaitsOutABlockedSwap(t *testing.T) {
	schema, db, l, stop := blockedLoad(t)
	defer stop()
	opts := testOptions(srv, schema, "t")
	logs := &logLines{}
	opts.Logger = logs.logger()
	opts.Cutover = cutover.DefaultConfig()
	opts.Cutover.Backoff = 50 * time.Millisecond // the old give-up: 30 × 50 ms = 1.5 s
	// Both blockers are in place before the cut-over's first look, the report running under the
	// lock (reportUnderLock): a LOCK TABLES ... READ taken after the report ended queued behind the
	// application's writes, and the swap got in first (seen in CI).
	var report int64
	var endReport, unlock func()
	opts.Hook = atCutover(func() {
		report, endReport, unlock = reportUnderLock(t, db, dbconn.QualifiedName(schema, "t"))
	})
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = Run(context.Background(), db, opts)
		done <- err
	}()
	waitForLog(t, logs, "waiting: long_queries", time.Minute)
	waitForLog(t, logs, fmt.Sprintf("connection %d (", report), 10*time.Second)
	time.Sleep(3 * time.Second) // twice the old give-up
	endReport()
	waitForLog(t, logs, "waiting: cutover", 10*time.Second)
	time.Sleep(3 * time.Second)
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("apply: %v\n%s", err, logs)
	}
	t.Logf("swapped after %d attempts", res.Cutover.Attempts)
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("t is not InnoDB")
	}
	checkAcked(t, db, l, stop, schema)
}

// A swap kept out past --cutover-timeout ends apply with exit code 8, the shadow, its capture and
// the state kept; running the same apply again goes straight to the swap (nothing copied,
// nothing verified), with no acknowledged write lost in between.
func TestCutoverTimeoutKeepsTheShadowForTheNextRun(t *testing.T) {
	schema, db, l, stop := blockedLoad(t)
	defer stop()
	opts := testOptions(srv, schema, "t")
	logs := &logLines{}
	opts.Logger = logs.logger()
	opts.Cutover = cutover.DefaultConfig()
	opts.Cutover.Backoff, opts.Cutover.Timeout = 50*time.Millisecond, 2*time.Second
	var unlock func()
	opts.Hook = atCutover(func() { _, unlock = holdTable(t, db, "LOCK TABLES "+dbconn.QualifiedName(schema, "t")+" READ") })
	_, err := Run(context.Background(), db, opts)
	unlock()
	if outcome.CodeOf(err) != outcome.CutoverPending || !errors.Is(err, cutover.ErrGaveUp) || !strings.Contains(err.Error(), "run the same apply again") {
		t.Fatalf("apply at the limit: code %d, %v", outcome.CodeOf(err), err)
	}
	if engineOf(t, db, schema, "t") != "MyISAM" || engineOf(t, db, schema, "_t_new") != "InnoDB" || tableExists(t, db, schema, "t_emswap") {
		t.Fatalf("after the limit: t %q, _t_new %q, sentry left %v", engineOf(t, db, schema, "t"), engineOf(t, db, schema, "_t_new"), tableExists(t, db, schema, "t_emswap"))
	}
	time.Sleep(time.Second) // writes while no enginemig runs: the next run's capture must bring them over
	opts.Cutover.Timeout, opts.Hook = time.Minute, nil
	logs2 := &logLines{}
	opts.Logger = logs2.logger()
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatalf("the same apply again: %v\n%s", err, logs2)
	}
	if res.RowsCopied != 0 || res.Verify != nil || !strings.Contains(logs2.String(), "resuming migration") || strings.Contains(logs2.String(), "msg=copied") {
		t.Errorf("the second run copied %d rows (verify %+v): want straight to the swap\n%s", res.RowsCopied, res.Verify, logs2)
	}
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("t is not InnoDB after the second run")
	}
	checkAcked(t, db, l, stop, schema)
}

// atCutover is a hook that runs block once, when the cut-over is about to start (copy, index
// build and verification done), and gives it a moment to take the table.
func atCutover(block func()) func(context.Context, Point, *state.State) error {
	return func(_ context.Context, at Point, _ *state.State) error {
		if at == Before(state.StageCutover) {
			block()
			time.Sleep(300 * time.Millisecond)
		}
		return nil
	}
}

// waitForLog waits until the log holds want.
func waitForLog(t *testing.T, logs *logLines, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within %s:\n%s", want, limit, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
