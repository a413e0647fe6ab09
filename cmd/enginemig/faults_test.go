package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/plan"
)

// Fault tests: the enginemig binary runs as a subprocess against a sandbox server while an
// application load (package ackload) writes to the table the whole time. Each test injects one
// fault and asserts that (1) the application lost no acknowledged write and never read a stale
// row, (2) enginemig ended with a clear exit code and message, and (3) running apply again (or
// cleanup) finishes the job.

// faultSeed makes the random kill points reproducible: ENGINEMIG_FAULT_SEED=N repeats a run.
func faultSeed(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ENGINEMIG_FAULT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("ENGINEMIG_FAULT_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, 7))
}

func startLoad(t *testing.T, e *faultEnv, schema, table string, writers, rowsPerWriter int) (*ackload.Load, func()) {
	t.Helper()
	l, err := ackload.Create(context.Background(), e.app, schema, table, ackload.Config{Writers: writers, RowsPerWriter: rowsPerWriter,
		Seed: uint64(time.Now().UnixNano()), Pause: 500 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := l.Start()
	t.Cleanup(stop)
	return l, stop
}

func afterCopy(st string) bool {
	return st == "indexes" || st == "verify" || st == "cutover" || st == "done"
}

// SIGKILL of the binary during the copy and again after it; each following apply resumes, and
// the final table holds exactly the acknowledged writes. A second table is killed during the copy
// and then cleaned up instead: the original is intact and the leftovers are gone.
func TestSIGKILLDuringApply(t *testing.T) { sigkillDuringApply(t, "kill", nil) }

// The same with trigger capture (forced here on a server with a ROW binlog): the triggers keep
// noting changes while no enginemig runs, and cleanup removes them with the shadow.
func TestSIGKILLDuringApplyTriggerCapture(t *testing.T) {
	sigkillDuringApply(t, "killtrg", []string{"--capture", "triggers"})
}

func sigkillDuringApply(t *testing.T, database string, extra []string) {
	e := faultServer(t)
	r := faultSeed(t)
	schema := e.database(t, database)
	// 60k rows: the staged copy of 24k rows under these writers sometimes ended within the 650 ms
	// before the first kill.
	l, stop := startLoad(t, e, schema, "t", 4, 15000)
	apply := append([]string{"apply", "--database", schema, "--table", "t", "--no-progress"}, extra...)

	// 1. Killed at a random moment of the copy, which 1 ms chunks make long enough to land in.
	// The runs after it resume with apply's defaults, as a DBA runs it again.
	p := e.start(t, append(apply, "--chunk-time", "1ms")...)
	e.waitStage(t, p, schema, "t", func(s string) bool { return s == "copy" })
	time.Sleep(time.Duration(50+r.IntN(600)) * time.Millisecond)
	p.cmd.Process.Kill()
	p.wait(t, time.Minute)
	st, copied := e.stage(schema, "t")
	t.Logf("killed in stage %s after %d recorded rows", st, copied)
	if st != "copy" {
		t.Fatalf("the copy finished before the kill (stage %s): make the table larger", st)
	}
	// status tells a dead run from a running one: nobody holds the table's lock any more.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, out := e.run(t, "status", "--database", schema, "--table", "t", "--output", "json")
		if strings.Contains(out, `"interrupted": true`) && strings.Contains(out, "run the same apply again") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status does not say the killed run is interrupted:\n%s", out)
		}
	}

	// 2. The next run resumes; killed again at a random point after the copy.
	p = e.start(t, apply...)
	killedAt := e.waitStage(t, p, schema, "t", afterCopy)
	if killedAt != "done" {
		time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
		p.cmd.Process.Kill()
	}
	code, out := p.wait(t, time.Minute)
	st, _ = e.stage(schema, "t")
	t.Logf("second run: stage %s when killed (exit %d), state now %s", killedAt, code, st)
	if !strings.Contains(out, "resuming migration") {
		t.Fatalf("the second run did not resume:\n%s", out)
	}
	if len(extra) > 0 && !strings.Contains(out, "capturing changes with triggers") {
		t.Fatalf("the resumed run did not capture with triggers:\n%s", out)
	}

	// 3. The last run finishes (or records the finished swap of run 2).
	code, out = e.run(t, apply...)
	if code != 0 {
		t.Fatalf("final apply: exit %d\n%s", code, out)
	}
	time.Sleep(300 * time.Millisecond) // writes on the converted table count too
	stop()
	if got := e.engine(schema, "t"); got != "InnoDB" {
		t.Fatalf("t is %s after the final apply\n%s", got, out)
	}
	if st, _ := e.stage(schema, "t"); st != "done" {
		t.Fatalf("state %s after the final apply", st)
	}
	checkLoad(t, e.app, l, schema, "t", false)

	t.Run("then cleanup", func(t *testing.T) {
		l2, stop2 := startLoad(t, e, schema, "c", 2, 15000) // large enough that the kill lands in the copy
		p := e.start(t, append([]string{"apply", "--database", schema, "--table", "c", "--chunk-time", "1ms", "--no-progress"}, extra...)...)
		e.waitStage(t, p, schema, "c", func(s string) bool { return s == "copy" })
		time.Sleep(time.Duration(50+r.IntN(200)) * time.Millisecond)
		p.cmd.Process.Kill()
		p.wait(t, time.Minute)
		code, out := e.run(t, "cleanup", "--database", schema, "--table", "c")
		stop2()
		if code != 0 || !strings.Contains(out, "_c_new") {
			t.Fatalf("cleanup: exit %d\n%s", code, out)
		}
		if e.engine(schema, "_c_new") != "" || e.engine(schema, "c") != "MyISAM" {
			t.Fatalf("after cleanup: c is %q, _c_new is %q", e.engine(schema, "c"), e.engine(schema, "_c_new"))
		}
		if st, _ := e.stage(schema, "c"); st != "failed" {
			t.Fatalf("state after cleanup: %s", st)
		}
		var triggers int
		e.app.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", schema).Scan(&triggers)
		if triggers != 0 {
			t.Fatalf("%d capture triggers left after cleanup", triggers)
		}
		checkLoad(t, e.app, l2, schema, "c", false)
	})
}

// The server restarts (clean shutdown) in the middle of the copy. With --reconnect-for 0 apply
// must stop with exit 7 and tell the user to run it again (reconnecting by itself is
// migration's TestServerRestartMidCopyResumesByItself); the next run resumes and the table is right.
func TestServerRestartMidCopy(t *testing.T) {
	e := faultServer(t)
	schema := e.database(t, "restart")
	l, stop := startLoad(t, e, schema, "t", 3, 6000)
	apply := []string{"apply", "--database", schema, "--table", "t", "--chunk-time", "1ms", "--no-progress"}
	p := e.start(t, append(apply, "--reconnect-for", "0")...)
	e.waitStage(t, p, schema, "t", func(s string) bool { return s == "copy" })
	time.Sleep(100 * time.Millisecond)
	if err := e.srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out := p.wait(t, 2*time.Minute)
	t.Logf("apply across the restart: exit %d; %s", code, lastLine(out))
	if code != int(outcome.NeedsAttention) || !strings.Contains(out, "run the same apply again to resume") {
		t.Fatalf("apply across a server restart with --reconnect-for 0: exit %d (want 7 with the resume advice)\n%s", code, out)
	}
	if strings.Contains(out, "lost the connection to the server; resuming") {
		t.Fatalf("apply reconnected although --reconnect-for was 0:\n%s", out)
	}
	code, out = e.run(t, apply...)
	if code != 0 || !strings.Contains(out, "resuming migration") {
		t.Fatalf("re-run: exit %d (want 0 and a resume)\n%s", code, out)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	if got := e.engine(schema, "t"); got != "InnoDB" {
		t.Fatalf("t is %s", got)
	}
	checkLoad(t, e.app, l, schema, "t", true) // the application itself saw the restart
}

// KILL of one of enginemig's server connections (found in the processlist: the tool runs as root,
// the application as app) during the copy, the replay and the verification.
func TestKillToolConnection(t *testing.T) {
	e := faultServer(t)
	schema := e.database(t, "killconn")
	for i, c := range []struct {
		name  string
		stage string
		where string // which root connection to kill
	}{
		{"copy chunk", "copy", "INFO LIKE 'REPLACE INTO%'"},
		{"binlog stream during copy", "copy", "COMMAND = 'Binlog Dump'"},
		{"verify", "verify", "(INFO LIKE '%BIT_XOR%' OR INFO LIKE 'LOCK TABLES%')"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tbl := fmt.Sprintf("t%d", i)
			l, stop := startLoad(t, e, schema, tbl, 3, 4000)
			apply := []string{"apply", "--database", schema, "--table", tbl, "--chunk-time", "1ms", "--no-progress"}
			p := e.start(t, apply...)
			e.waitStage(t, p, schema, tbl, func(s string) bool { return s == c.stage })
			var killed int64
			deadline := time.Now().Add(30 * time.Second)
			for killed == 0 && time.Now().Before(deadline) && p.running() {
				e.app.QueryRow("SELECT ID FROM information_schema.PROCESSLIST WHERE USER='root' AND " + c.where + " LIMIT 1").Scan(&killed)
				if killed == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			if killed == 0 {
				t.Fatalf("found no connection where %s", c.where)
			}
			if _, err := e.app.Exec(fmt.Sprintf("KILL %d", killed)); err != nil {
				t.Logf("KILL %d: %v", killed, err)
			}
			code, out := p.wait(t, 2*time.Minute)
			t.Logf("after KILL %d: exit %d; %s", killed, code, lastLine(out))
			switch code {
			case 0:
			case int(outcome.NeedsAttention), int(outcome.FailedSafe):
				if code == int(outcome.NeedsAttention) && !strings.Contains(out, "run the same apply again") {
					t.Fatalf("exit 7 without advice:\n%s", out)
				}
				if code == int(outcome.FailedSafe) && (e.engine(schema, tbl) != "MyISAM" || e.engine(schema, "_"+tbl+"_new") != "") {
					t.Fatalf("exit 6 but the original is not in place alone:\n%s", out)
				}
				if code, out = e.run(t, apply...); code != 0 {
					t.Fatalf("re-run: exit %d\n%s", code, out)
				}
			default:
				t.Fatalf("exit %d:\n%s", code, out)
			}
			time.Sleep(200 * time.Millisecond)
			stop()
			if got := e.engine(schema, tbl); got != "InnoDB" {
				t.Fatalf("%s is %s", tbl, got)
			}
			checkLoad(t, e.app, l, schema, tbl, false)
		})
	}
}

// FLUSH BINARY LOGS every few milliseconds while apply runs: replay follows the rotations.
func TestBinlogRotationDuringCopy(t *testing.T) {
	e := faultServer(t)
	schema := e.database(t, "rotate")
	l, stop := startLoad(t, e, schema, "t", 3, 5000)
	p := e.start(t, "apply", "--database", schema, "--table", "t", "--chunk-time", "1ms", "--no-progress")
	var flushes atomic.Int64
	go func() {
		for p.running() {
			if _, err := e.app.Exec("FLUSH BINARY LOGS"); err == nil {
				flushes.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	code, out := p.wait(t, 3*time.Minute)
	time.Sleep(200 * time.Millisecond)
	stop()
	t.Logf("%d binlog rotations while apply ran", flushes.Load())
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if flushes.Load() < 20 {
		t.Fatalf("only %d rotations: apply was too quick to test anything", flushes.Load())
	}
	checkLoad(t, e.app, l, schema, "t", false)
}

// ALTER TABLE on the source during the copy stops the migration cleanly (exit 6, a message that
// names the DDL); the original (with its new column) is intact and the shadow is gone. Applying
// again converts the altered table.
func TestDDLDuringCopy(t *testing.T) {
	e := faultServer(t)
	schema := e.database(t, "ddl")
	l, stop := startLoad(t, e, schema, "t", 3, 5000)
	apply := []string{"apply", "--database", schema, "--table", "t", "--chunk-time", "1ms", "--no-progress"}
	p := e.start(t, apply...)
	e.waitStage(t, p, schema, "t", func(s string) bool { return s == "copy" })
	time.Sleep(100 * time.Millisecond)
	sandboxtest.MustExec(t, e.app, "ALTER TABLE `"+schema+"`.t ADD COLUMN extra INT NULL")
	code, out := p.wait(t, time.Minute)
	if code != int(outcome.FailedSafe) || !strings.Contains(out, "changed by DDL") {
		t.Fatalf("exit %d (want 6 and a message about the DDL)\n%s", code, out)
	}
	if e.engine(schema, "t") != "MyISAM" || e.engine(schema, "_t_new") != "" {
		t.Fatalf("after the failure: t is %q, _t_new %q", e.engine(schema, "t"), e.engine(schema, "_t_new"))
	}
	t.Logf("stopped with: %s", lastLine(out))
	code, out = e.run(t, apply...)
	time.Sleep(200 * time.Millisecond)
	stop()
	if code != 0 {
		t.Fatalf("apply of the altered table: exit %d\n%s", code, out)
	}
	var n int
	e.app.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=? AND TABLE_NAME='t' AND COLUMN_NAME='extra'", schema).Scan(&n)
	if n != 1 || e.engine(schema, "t") != "InnoDB" {
		t.Fatalf("converted table lacks the new column or is not InnoDB")
	}
	checkLoad(t, e.app, l, schema, "t", false)
}

// Another client blocks the cut-over (an open transaction that read the table, or LOCK TABLES
// READ): the cut-over retries until its limit (here 3 attempts), then exits 8 with the original in
// place and unchanged and the shadow kept (no sentry left). Once the blocker is gone, the same
// apply goes straight to the swap and succeeds, with every acknowledged write there.
func TestCutoverBlocked(t *testing.T) {
	e := faultServer(t)
	schema := e.database(t, "blocked")
	for i, blocker := range []struct{ name, stmt string }{
		{"open transaction", "START TRANSACTION; SELECT COUNT(*) FROM %s"},
		{"LOCK TABLES READ", "LOCK TABLES %s READ"},
	} {
		t.Run(blocker.name, func(t *testing.T) {
			tbl := fmt.Sprintf("b%d", i)
			l, stop := startLoad(t, e, schema, tbl, 2, 3000)
			postpone := filepath.Join(t.TempDir(), "hold")
			os.WriteFile(postpone, nil, 0o600)
			apply := []string{"apply", "--database", schema, "--table", tbl, "--no-progress", "--skip-verify",
				"--cutover-attempts", "3", "--cutover-lock-wait", "100ms", "--cutover-backoff", "50ms"}
			p := e.start(t, append(apply, "--postpone-cutover-file", postpone)...)
			e.waitStage(t, p, schema, tbl, func(s string) bool { return s == "postponed" })
			conn, err := e.app.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(context.Background(), fmt.Sprintf(blocker.stmt, "`"+schema+"`."+tbl)); err != nil {
				t.Fatal(err)
			}
			os.Remove(postpone)
			start := time.Now()
			code, out := p.wait(t, time.Minute)
			t.Logf("gave up after %s: %s", time.Since(start).Round(time.Millisecond), lastLine(out))
			if code != int(outcome.CutoverPending) || !strings.Contains(out, "run the same apply again") {
				t.Fatalf("exit %d (want 8, cut-over pending, with its remedy)\n%s", code, out)
			}
			if e.engine(schema, tbl) != "MyISAM" || e.engine(schema, "_"+tbl+"_new") != "InnoDB" || e.engine(schema, tbl+"_emswap") != "" {
				t.Fatalf("after giving up: %s is %q, shadow %q (want kept), sentry %q", tbl, e.engine(schema, tbl),
					e.engine(schema, "_"+tbl+"_new"), e.engine(schema, tbl+"_emswap"))
			}
			conn.ExecContext(context.Background(), "UNLOCK TABLES")
			conn.ExecContext(context.Background(), "COMMIT")
			if code, out = e.run(t, apply...); code != 0 || !strings.Contains(out, "resuming migration") {
				t.Fatalf("apply once unblocked: exit %d (want 0, resuming at the cut-over)\n%s", code, out)
			}
			time.Sleep(200 * time.Millisecond)
			stop()
			checkLoad(t, e.app, l, schema, tbl, false)
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// A whole-plan run killed in its second table: running it again reports the first as already
// converted, resumes the second, and exits 0 once every table of the plan is InnoDB; a third run
// is a no-op.
func TestSIGKILLDuringPlanResumes(t *testing.T) {
	e := faultServer(t)
	schema := e.database(t, "killplan")
	l1, stop1 := startLoad(t, e, schema, "p1", 2, 2000)
	l2, stop2 := startLoad(t, e, schema, "p2", 4, 6000)
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if code, out := e.run(t, "plan", "--database", schema, "--out", planFile); code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	pl, err := plan.ReadFile(planFile)
	if err != nil || len(pl.Tables) != 2 {
		t.Fatalf("plan file: %v %+v", err, pl)
	}
	first, second := pl.Tables[0].Table, pl.Tables[1].Table // the plan's order (by contention)
	apply := []string{"apply", "--plan", planFile, "--no-progress"}
	// 1 ms chunks make the second table's copy long enough for the kill to land in it; the runs
	// after it are apply's defaults, as a DBA runs it again.
	p := e.start(t, append(apply, "--chunk-time", "1ms")...)
	e.waitStage(t, p, schema, second, func(s string) bool { return s == "copy" })
	time.Sleep(100 * time.Millisecond)
	p.cmd.Process.Kill()
	p.wait(t, time.Minute)
	if e.engine(schema, first) != "InnoDB" || e.engine(schema, second) != "MyISAM" {
		t.Fatalf("killed in %s's copy: %s is %s, %s is %s", second, first, e.engine(schema, first), second, e.engine(schema, second))
	}
	code, out := e.run(t, apply...)
	if code != 0 || !strings.Contains(out, "already-converted") || !strings.Contains(out, "resuming migration") {
		t.Fatalf("second run: exit %d\n%s", code, out)
	}
	time.Sleep(200 * time.Millisecond)
	stop1()
	stop2()
	checkLoad(t, e.app, l1, schema, "p1", false)
	checkLoad(t, e.app, l2, schema, "p2", false)
	if code, out := e.run(t, apply...); code != 0 || strings.Count(out, "already-converted") != 2 {
		t.Fatalf("third run: exit %d\n%s", code, out)
	}
}
