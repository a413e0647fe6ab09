package migration

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/migration/state"
)

// holdWriteLock has another client (not one of enginemig's connections) take LOCK TABLES t WRITE
// and returns its connection id and the function that unlocks.
func holdWriteLock(t *testing.T, schema string) (int64, func()) {
	return holdWriteLockOn(t, schema, "t")
}

func holdWriteLockOn(t *testing.T, schema, name string) (int64, func()) {
	t.Helper()
	other, err := srv.Open(schema)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "LOCK TABLES `"+name+"` WRITE"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			conn.ExecContext(context.Background(), "UNLOCK TABLES")
			conn.Close()
			other.Close()
		}
	}
	t.Cleanup(unlock)
	return id, unlock
}

// While another client holds LOCK TABLES t WRITE, apply says at once what it waits on and who
// holds it (log, control status), keeps waiting, and goes on when the lock is released.
func TestLockWaitIsReportedWithItsHolder(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(20000))
	holder, unlock := holdWriteLock(t, schema)

	var logs logLines
	reported := make(chan time.Time, 1)
	logs.each = func(line string) {
		if strings.Contains(line, `msg="waiting for a lock"`) {
			select {
			case reported <- time.Now():
			default:
			}
		}
	}
	opts := testOptions(srv, schema, "t")
	opts.Logger = logs.logger()
	opts.ControlSocket = filepath.Join(t.TempDir(), "ctl.sock")
	opts.MetricsListen = "127.0.0.1:0"
	addr := make(chan string, 1)
	opts.MetricsAddr = func(a string) { addr <- a }
	start := time.Now()
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), db, opts); done <- err }()

	var at time.Time
	select {
	case at = <-reported:
	case err := <-done:
		t.Fatalf("apply ended (%v) while the table was locked, without reporting the wait:\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("no lock wait reported within 20 s:\n%s", logs.String())
	}
	// Polled every 250 ms once a statement waited 500 ms: the report comes within about a
	// second of the wait's start (its waited= says when, by the server's clock).
	line := logs.String()
	if m := regexp.MustCompile(`msg="waiting for a lock".* waited=(\S+)`).FindStringSubmatch(line); m == nil {
		t.Errorf("no waited= in the report:\n%s", line)
	} else if waited, err := time.ParseDuration(m[1]); err != nil || waited > 1500*time.Millisecond {
		t.Errorf("the wait was first reported after waiting %s; want about a second", m[1])
	}
	if took := at.Sub(start); took > 10*time.Second {
		t.Errorf("the wait was reported %s after apply started", took)
	}
	if !regexp.MustCompile(fmt.Sprintf(`blocked_by="[^"]*connection %d \(user root@`, holder)).MatchString(line) {
		t.Errorf("the report does not name the holder, connection %d of user root:\n%s", holder, line)
	}
	st, err := control.GetStatus(context.Background(), opts.ControlSocket)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Waiting) != 1 || st.Waiting[0].Kind != "lock" || st.LockWaits != 1 || !hasBlocker(st, holder) {
		t.Errorf("control status while waiting: waiting %+v, lock_waits %d; want one lock wait held by %d", st.Waiting, st.LockWaits, holder)
	}
	metrics := scrape(t, "http://"+<-addr+"/metrics")
	for _, want := range []string{`enginemig_blocked{on="lock",schema=`, fmt.Sprintf(`enginemig_blocked_by{connection="%d",on="lock"`, holder)} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics while waiting lack %s:\n%s", want, metrics)
		}
	}
	if v, _ := metricValue(metrics, "enginemig_lock_waits_total{"); v != 1 {
		t.Errorf("enginemig_lock_waits_total %v while waiting; want 1", v)
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("apply after the lock was released: %v", err)
	}
	if !strings.Contains(logs.String(), `msg="lock wait over"`) || engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatalf("not converted after the wait, or its end not logged:\n%s", logs.String())
	}
}

func hasBlocker(st control.Status, id int64) bool {
	for _, w := range st.Waiting {
		for _, b := range w.Blockers {
			if b.ID == id {
				return true
			}
		}
	}
	return false
}

// With a short --lock-timeout, a lock held longer ends the run: exit code 6 (original in place),
// the holder named in the error with a remedy, no shadow or sentry left, and no statement of
// enginemig left waiting in the server. Once with the lock taken before apply starts (its
// preflight waits), once taken when the shadow exists (the copy's first chunk waits).
func TestLockTimeoutStopsWithNothingChanged(t *testing.T) {
	for _, when := range []string{"preflight", "copy"} {
		t.Run(when, func(t *testing.T) {
			schema, sdb := sandboxtest.FreshDatabase(t, srv)
			db := openControl(t, srv)
			sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(20000))
			opts := testOptions(srv, schema, "t")
			opts.LockTimeout = time.Second
			var holder int64
			unlock := func() {}
			if when == "preflight" {
				holder, unlock = holdWriteLock(t, schema)
			} else {
				opts.Hook = func(ctx context.Context, at Point, st *state.State) error {
					if at == Before(state.StageCopy) {
						if !tableExists(t, db, schema, "_t_new") {
							t.Error("no shadow when the copy starts")
						}
						holder, unlock = holdWriteLock(t, schema)
					}
					return nil
				}
			}
			start := time.Now()
			_, err := Run(context.Background(), db, opts)
			took := time.Since(start)
			unlock()
			if err == nil {
				t.Fatal("apply succeeded while the table was locked past --lock-timeout")
			}
			if outcome.CodeOf(err) != outcome.FailedSafe || !strings.Contains(err.Error(), "--lock-timeout") ||
				!strings.Contains(err.Error(), fmt.Sprintf("connection %d", holder)) || !strings.Contains(err.Error(), "raise --lock-timeout") {
				t.Fatalf("error: %v (code %v); want exit 6 naming --lock-timeout and connection %d", err, outcome.CodeOf(err), holder)
			}
			if took > 5*time.Second {
				t.Errorf("gave up after %s with a 1 s timeout", took)
			}
			for _, leftover := range []string{"_t_new", "t_emswap"} {
				if tableExists(t, db, schema, leftover) {
					t.Errorf("%s left behind", leftover)
				}
			}
			var n int
			db.QueryRow("SELECT COUNT(*) FROM `" + schema + "`.t").Scan(&n)
			if engineOf(t, db, schema, "t") != "MyISAM" || n != 20000 {
				t.Errorf("original changed: engine %s, %d rows", engineOf(t, db, schema, "t"), n)
			}
			if w := waitingStatements(t, db, schema); w != "" {
				t.Errorf("statements left waiting in the server: %s", w)
			}
		})
	}
}

func waitingStatements(t *testing.T, db *sql.DB, schema string) string {
	t.Helper()
	var out []string
	rows, err := db.Query("SELECT ID, COALESCE(STATE, ''), COALESCE(INFO, '') FROM information_schema.PROCESSLIST WHERE INFO LIKE ?", "%"+schema+"%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var state, info string
		rows.Scan(&id, &state, &info)
		if !strings.Contains(info, "PROCESSLIST") {
			out = append(out, fmt.Sprintf("%d %s: %s", id, state, info))
		}
	}
	return strings.Join(out, "; ")
}

// A rollback whose replay onto the kept original waits for another client's lock on it reports
// the wait the same way and, past --lock-timeout, stops with nothing swapped back.
func TestRollbackLockTimeout(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(1000))
	if _, err := Run(context.Background(), db, testOptions(srv, schema, "t")); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, sdb, "INSERT INTO t VALUES (5000, 1)") // a change for the rollback to replay
	holder, unlock := holdWriteLockOn(t, schema, "_t_old")
	defer unlock()
	var logs logLines
	_, err := rollback.Run(context.Background(), db, rollback.Options{Conn: connConfig(srv), Schema: schema, Table: "t",
		StateSchema: "_enginemig_test", Logger: logs.logger(), LockTimeout: time.Second})
	if outcome.CodeOf(err) != outcome.FailedSafe || !strings.Contains(fmt.Sprint(err), "nothing was swapped back") ||
		!strings.Contains(fmt.Sprint(err), fmt.Sprintf("connection %d", holder)) {
		t.Fatalf("rollback with _t_old locked: %v (code %v); want exit 6 naming connection %d\n%s", err, outcome.CodeOf(err), holder, logs.String())
	}
	if !strings.Contains(logs.String(), `msg="waiting for a lock"`) || engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatalf("no wait logged, or the table was swapped back:\n%s", logs.String())
	}
}
