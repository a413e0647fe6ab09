package mdl_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/internal/testkit/trxapp"
)

// locks takes LOCK TABLES t WRITE again and again for d through lock, holding it a moment each
// time, and counts the grants; past d it goes on, up to 20d, until one lock was granted and seen
// says it saw what it waits for (a machine busy with other work stretches the application's
// transactions and shortens its gaps, and changes how often they meet a queued lock: in a CI run
// with three test binaries on 2 cores, 20 tries over 4d found no gap on MariaDB 11.8, where the
// product's own lock goes on trying until --lock-timeout). gap, when set, is told (true) once 10d
// passed without a grant, to make the application pause, and (false) after the next grant: on a
// machine loaded enough, eight transactional clients left no gap in 30 s (CI, MariaDB 11.8), and a
// lock that never queues behind them must then take the first one they leave.
func locks(t *testing.T, db *sql.DB, d time.Duration, seen func() bool, gap func(bool), lock func(ctx context.Context, conn *sql.Conn, id int64) error) (granted, refused int) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	start, paused := time.Now(), false
	for ; time.Since(start) < d || (granted == 0 || !seen()) && time.Since(start) < 20*d; time.Sleep(10 * time.Millisecond) {
		if gap != nil && granted == 0 && !paused && time.Since(start) > 10*d {
			t.Logf("no gap in %s: the application pauses", time.Since(start).Round(time.Millisecond))
			gap(true)
			paused = true
		}
		if err := lock(ctx, conn, id); err != nil {
			refused++
			continue
		}
		if paused {
			gap(false)
			paused = false
		}
		granted++
		time.Sleep(2 * time.Millisecond)
		if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			t.Fatal(err)
		}
	}
	return granted, refused
}

// The application's transactions never fail while enginemig takes the table's lock through a
// Locker, on either engine; the same load and the same locks sent plainly (queued) show that the
// load meets the deadlock the Locker avoids.
func TestLockNeverFailsAnOpenTransaction(t *testing.T) {
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		t.Skip("MySQL has no LOCK TABLES ... NOWAIT: the lock queues there as before (package comment; docs/runbook.md)")
	}
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	for _, engine := range []string{"MyISAM", "InnoDB"} {
		t.Run(engine, func(t *testing.T) {
			const rows = 200
			_, db := sandboxtest.FreshDatabase(t, srv)
			db.SetMaxOpenConns(16)
			sandboxtest.MustExec(t, db, trxapp.Schema(engine, sandboxtest.Seq(rows))...)
			l, err := mdl.New(context.Background(), db, "t")
			if err != nil {
				t.Fatal(err)
			}
			// run's seen: whether to stop after 1.5 s, given the application's failures so far.
			// pause: whether the application may pause when the lock finds no gap (the Locker's run).
			run := func(name string, seen func(failed int) bool, pause bool, lock func(ctx context.Context, conn *sql.Conn, id int64) error) (errs []string, granted, refused int, committed int64) {
				var app trxapp.App
				ctx, stop := context.WithCancel(context.Background())
				wg := app.Run(ctx, db, rows, 8)
				defer app.Resume()
				time.Sleep(100 * time.Millisecond)
				var gap func(bool)
				if pause {
					gap = func(on bool) {
						if on {
							app.Pause()
						} else {
							app.Resume()
						}
					}
				}
				granted, refused = locks(t, db, 1500*time.Millisecond, func() bool { return seen(len(app.Errors())) }, gap, lock)
				stop()
				wg.Wait()
				errs = app.Errors()
				t.Logf("%s: %d locks granted, %d not within 300 ms; %d transactions committed, %d failed%s", name, granted, refused, app.Committed.Load(), len(errs),
					strings.Join(append([]string{""}, errs[:min(1, len(errs))]...), ", e.g. "))
				return errs, granted, refused, app.Committed.Load()
			}
			lockerErrs, granted, _, committed := run("through the Locker", func(int) bool { return true }, true, func(ctx context.Context, conn *sql.Conn, id int64) error {
				return l.Tries(ctx, conn, "LOCK TABLES t WRITE", 300*time.Millisecond)
			})
			if granted == 0 || committed == 0 {
				t.Errorf("%d locks granted, %d transactions committed: the Locker must get its lock and let the application work", granted, committed)
			}
			// Queued, it goes on (up to 30 s) until a transaction failed: the proof that this load
			// meets the deadlock at all.
			queuedErrs, _, _, _ := run("queued", func(failed int) bool { return failed > 0 }, false, func(ctx context.Context, conn *sql.Conn, id int64) error {
				_, err := conn.ExecContext(ctx, "LOCK TABLES t WRITE")
				return err
			})
			if len(queuedErrs) == 0 {
				t.Errorf("the same locks queued failed no transaction: the load does not meet the deadlock, and the Locker's run proves nothing")
			}
			if len(lockerErrs) > 0 {
				t.Errorf("%d of the application's transactions failed while the Locker took the lock, e.g. %s", len(lockerErrs), lockerErrs[0])
			}
		})
	}
}

// mayQueue sees an application transaction open between its statements, and does not count one
// of enginemig's own statements (one that names the Locker's own tables) as such a sign. MySQL
// always queues: there mayQueue is not asked.
func TestMayQueueSeesOpenTransactionsButNotEnginemigsOwn(t *testing.T) {
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		t.Skip("MySQL: every lock queues (package comment); MayQueue is MariaDB's")
	}
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MyISAM", "CREATE TABLE _t_new (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE other (id INT PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO other VALUES (1)")
	ctx := context.Background()
	own := "`" + schema + "`.`_t_new`"
	l, err := mdl.New(ctx, db, "t", own)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*sql.Conn, 2)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	if !l.MayQueue(ctx, conns[0]) {
		t.Fatal("no transaction open: MayQueue says no")
	}
	app := conns[1]
	if _, err := app.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := app.QueryRowContext(ctx, "SELECT COUNT(*) FROM other").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if l.MayQueue(ctx, conns[0]) {
		t.Fatal("an application transaction is open between its statements: MayQueue says yes")
	}
	if _, err := app.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// enginemig's own statement, running (a chunk's INSERT ... SELECT into the shadow: InnoDB
	// lists its transaction from its first row on).
	done := make(chan error, 1)
	go func() {
		_, err := app.ExecContext(ctx, "INSERT INTO "+own+" SELECT seq FROM seq_1_to_5 WHERE SLEEP(0.4) = 0")
		done <- err
	}()
	// (Looks 150 ms apart: the server fills the list again only when nobody read it for 100 ms.)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(150 * time.Millisecond) {
		if err := conns[0].QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE INSTR(trx_query, ?) > 0", own).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("enginemig's statement never showed in INNODB_TRX")
		}
	}
	if !l.MayQueue(ctx, conns[0]) {
		t.Error("only enginemig's own statement runs: MayQueue says no")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A chunk's lock (VerifyChunk), which must not queue behind an open transaction holding the table,
// waits for it, and the wait is reported (Waiting, ReportEvery) while it lasts; once the
// transaction commits the lock is taken.
func TestChunkLockReportsTheWaitForAnOpenTransaction(t *testing.T) {
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		t.Skip("MySQL: every lock queues (package comment); the wait for a gap is MariaDB's")
	}
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t VALUES (1, 0)",
		"CREATE TABLE o (id INT PRIMARY KEY) ENGINE=InnoDB")
	ctx := context.Background()
	l, err := mdl.New(ctx, db, "t")
	if err != nil {
		t.Fatal(err)
	}
	app, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	// A transaction that wrote t and, as trigger capture's triggers do, an InnoDB table that the
	// lock takes with t (verification locks the change log with the source): o's metadata lock is
	// held until COMMIT, and INNODB_TRX lists the transaction (MayQueue says no).
	for _, q := range []string{"BEGIN", "UPDATE t SET v = v + 1 WHERE id = 1", "INSERT INTO o VALUES (1)"} {
		if _, err := app.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var reports []string
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) {
		mu.Lock()
		reports = append(reports, string(p))
		mu.Unlock()
	}), nil))
	l.Waiting = l.ReportEvery(log, "verify", 300*time.Millisecond)
	committed := make(chan time.Time, 1)
	go func() {
		time.Sleep(time.Second)
		sent := time.Now() // the lock cannot be granted before the COMMIT is sent
		if _, err := app.ExecContext(ctx, "COMMIT"); err != nil {
			t.Error(err)
		}
		committed <- sent
	}()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := l.Take(ctx, conn, mdl.VerifyChunk.Spinning(100*time.Millisecond), "LOCK TABLES t READ, o WRITE"); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	conn.ExecContext(ctx, "UNLOCK TABLES")
	at := <-committed
	mu.Lock()
	defer mu.Unlock()
	t.Logf("granted %s after the COMMIT was sent; reports:\n%s", granted.Sub(at).Round(time.Millisecond), strings.Join(reports, ""))
	if granted.Before(at) {
		t.Fatalf("the lock was granted %s before the transaction holding o was told to commit", at.Sub(granted))
	}
	if len(reports) == 0 || !strings.Contains(reports[0], "verify: waiting for a moment when no open transaction holds t") {
		t.Fatalf("the wait of a second was not reported: %q", reports)
	}
}

// writerFunc is an io.Writer calling f with each write.
type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// The report adds the waits of one lock after another (a verification's chunks, each waiting less
// than the report's interval) and says how long in all.
func TestReportEveryAddsUpTheWaits(t *testing.T) {
	var lines []string
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) { lines = append(lines, string(p)) }), nil))
	report := (&mdl.Locker{}).ReportEvery(log, "verify", time.Second)
	for range 25 { // 25 spins of 100 ms: 2.5 s in all, however many locks they belonged to
		report(100 * time.Millisecond)
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "waited=1s") || !strings.Contains(lines[1], "waited=2s") {
		t.Fatalf("want reports at 1 s and 2 s in all, got %q", lines)
	}
}

// heldByATransaction starts a server with t (one row) read FOR UPDATE by an open transaction,
// the application's (app), and returns a Locker for t and a connection for enginemig's lock.
// MariaDB only: on MySQL every lock queues (package comment).
func heldByATransaction(t *testing.T, ctx context.Context) (l *mdl.Locker, app, conn *sql.Conn) {
	t.Helper()
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		t.Skip("MySQL: every lock queues (package comment); the wait for a gap is MariaDB's")
	}
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO t VALUES (1, 0)")
	l, err := mdl.New(ctx, db, "t")
	if err != nil {
		t.Fatal(err)
	}
	if app, err = db.Conn(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	// Its metadata lock on t is held until it ends, and INNODB_TRX lists it, so the lock must not queue.
	for _, q := range []string{"BEGIN", "SELECT v FROM t WHERE id = 1 FOR UPDATE"} {
		if _, err := app.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if conn, err = db.Conn(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return l, app, conn
}

// The trigger carry's lock of the live table (Carry) gives up with ErrNotGranted once its bound
// has passed while an application transaction holds the table, without ever queuing behind it,
// and takes the lock once the transaction has ended.
func TestCarryLockGivesUpAtItsBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, app, conn := heldByATransaction(t, ctx)
	const within = time.Second
	start := time.Now()
	err := l.Take(ctx, conn, mdl.Carry(within).Spinning(100*time.Millisecond), "LOCK TABLES t WRITE")
	took := time.Since(start)
	if !errors.Is(err, mdl.ErrNotGranted) || took < within || took > 10*within {
		t.Fatalf("with t held by an open transaction: %v after %s, want ErrNotGranted after about %s", err, took.Round(time.Millisecond), within)
	}
	// The application's transaction goes on as if nothing had waited for it.
	if _, err := app.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE id = 1"); err != nil {
		t.Fatalf("the application's update after the carry's lock gave up: %v", err)
	}
	if _, err := app.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := l.Take(ctx, conn, mdl.Carry(within).Spinning(100*time.Millisecond), "LOCK TABLES t WRITE"); err != nil {
		t.Fatalf("with t free: %v", err)
	}
	conn.ExecContext(ctx, "UNLOCK TABLES")
}

// The carry's bound never cancels a statement in flight: the driver closes a connection whose
// statement is cancelled, and the caller goes on using conn (CI once failed the test above with
// "driver: bad connection" on the lock after the bound). Bounds of a few milliseconds, with t held,
// end during the Locker's statements more often than not.
func TestCarryLockKeepsTheConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, _, conn := heldByATransaction(t, ctx)
	for i := range 30 {
		within := time.Duration(1+i%5) * time.Millisecond
		if err := l.Take(ctx, conn, mdl.Carry(within).Spinning(time.Millisecond), "LOCK TABLES t WRITE"); !errors.Is(err, mdl.ErrNotGranted) {
			t.Fatalf("try %d, bound %s: %v, want ErrNotGranted", i, within, err)
		}
		if err := conn.PingContext(ctx); err != nil {
			t.Fatalf("try %d, bound %s: the connection after the carry's lock gave up: %v", i, within, err)
		}
	}
}

// A lock with no purpose is refused before anything is sent: the zero Purpose states no rules.
func TestTakeRefusesNoPurpose(t *testing.T) {
	if err := (&mdl.Locker{}).Take(context.Background(), nil, mdl.Purpose{}, "LOCK TABLES t WRITE"); err == nil {
		t.Fatal("a lock with no purpose was taken")
	}
}

// A cut-over attempt's lock (Swap) on a table an open transaction holds is refused by the
// attempt's rules: on MariaDB after its tries (2 s at the least), on MySQL queued and killed at
// its bound. refused is told how long, with the server's last answer, and its error is the
// attempt's; the connection and the application's transaction go on.
func TestSwapIsRefusedByItsRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO t VALUES (1, 0)")
	l, err := mdl.New(ctx, db, "t")
	if err != nil {
		t.Fatal(err)
	}
	app, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	for _, q := range []string{"BEGIN", "SELECT v FROM t WHERE id = 1 FOR UPDATE"} {
		if _, err := app.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	const bound = 200 * time.Millisecond
	want, prefix := 2*time.Second, "tried for 2s: " // the tries of MariaDB
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		want, prefix = bound, "within 200ms: "
	}
	errHeld := errors.New("held by the application")
	var tried time.Duration
	var last error
	start := time.Now()
	err = l.Take(ctx, conn, mdl.Swap(bound, id, func(d time.Duration, err error) error {
		tried, last = d, err
		return errHeld
	}), "LOCK TABLES t WRITE")
	took := time.Since(start)
	if !errors.Is(err, errHeld) || !strings.HasPrefix(err.Error(), prefix) || tried != want || last == nil || took < want || took > want+5*time.Second {
		t.Fatalf("after %s: %v (refused told %s, %v); want %q wrapping refused's error, told %s, after about that", took.Round(time.Millisecond), err, tried, last, prefix, want)
	}
	if err := conn.PingContext(ctx); err != nil {
		t.Fatalf("the connection after the refused lock: %v", err)
	}
	for _, q := range []string{"UPDATE t SET v = v + 1 WHERE id = 1", "COMMIT"} {
		if _, err := app.ExecContext(ctx, q); err != nil {
			t.Fatalf("the application's %s after the refused lock: %v", q, err)
		}
	}
}
