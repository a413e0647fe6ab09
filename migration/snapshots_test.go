package migration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
)

// snapshotApp is an application whose sessions run with autocommit off: each transaction reads
// the InnoDB table o first (which takes its InnoDB snapshot), then t, by its key and by its
// secondary index, counting every row. Any error, and any count but rows, is a failure.
type snapshotApp struct {
	db     *sql.DB
	schema string
	rows   int

	mu       sync.Mutex
	failures []string
	spanned  atomic.Int64 // transactions that took their snapshot before the swap and read t after it
	reads    atomic.Int64
}

func (a *snapshotApp) fail(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failures = append(a.failures, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

// engine is t's engine as the data dictionary says (no snapshot is involved in reading it).
func (a *snapshotApp) engine(ctx context.Context) string {
	var e sql.NullString
	a.db.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'", a.schema).Scan(&e)
	return e.String
}

// begin opens a session with autocommit off and takes its snapshot.
func (a *snapshotApp) begin(ctx context.Context) (*sql.Conn, string, error) {
	conn, err := a.db.Conn(ctx)
	if err != nil {
		return nil, "", err
	}
	before := a.engine(ctx)
	var n int
	if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		conn.Close()
		return nil, "", err
	}
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM o").Scan(&n); err != nil {
		conn.Close()
		return nil, "", err
	}
	return conn, before, nil
}

// readAndCommit reads t in the transaction begin opened, checks the counts and commits.
func (a *snapshotApp) readAndCommit(ctx context.Context, who string, conn *sql.Conn, before string) {
	defer conn.Close()
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	for _, q := range []string{"SELECT COUNT(*) FROM t FORCE INDEX (PRIMARY)", "SELECT COUNT(*) FROM t FORCE INDEX (ka) WHERE a >= 0"} {
		var n int
		if err := conn.QueryRowContext(ctx, q).Scan(&n); err != nil {
			a.fail("%s (snapshot taken while t was %s): %s: %v", who, before, q, err)
			return
		}
		if n != a.rows {
			a.fail("%s (snapshot taken while t was %s): %s counted %d rows of %d", who, before, q, n, a.rows)
		}
	}
	a.reads.Add(1)
	if before == "MyISAM" && a.engine(ctx) == "InnoDB" {
		a.spanned.Add(1)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		a.fail("%s: COMMIT: %v", who, err)
	}
}

// hold takes a snapshot now and, in the background, reads t once t is InnoDB or holdFor has
// passed, whichever comes first: a transaction of bounded length that reads t after the swap
// whenever the swap comes within it.
func (a *snapshotApp) hold(ctx context.Context, wg *sync.WaitGroup, who string, holdFor time.Duration) error {
	conn, before, err := a.begin(ctx)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for end := time.Now().Add(holdFor); time.Now().Before(end) && a.engine(ctx) != "InnoDB"; {
			time.Sleep(5 * time.Millisecond)
		}
		a.readAndCommit(ctx, who, conn, before)
	}()
	return nil
}

// loop runs short transactions (snapshot, a pause of 20–60 ms, the reads of t) until ctx ends.
func (a *snapshotApp) loop(ctx context.Context, wg *sync.WaitGroup, id int) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			conn, before, err := a.begin(ctx)
			if err != nil {
				if ctx.Err() == nil {
					a.fail("session %d: begin: %v", id, err)
				}
				return
			}
			time.Sleep(time.Duration(20+(id*7+i*13)%40) * time.Millisecond)
			a.readAndCommit(context.WithoutCancel(ctx), fmt.Sprintf("session %d", id), conn, before)
		}
	}()
}

// No transaction of the application reads the converted table from a snapshot older than the
// cut-over. InnoDB refuses a read of a table created after the reader's snapshot (error 1412,
// "Table definition has changed"), by any index; a snapshot younger than the shadow but older than
// its rows sees them missing (docs/how-it-works/cutover.md, "Snapshots older than the InnoDB
// table"). Transactions with autocommit off take their snapshot at the start hook (before the
// shadow exists) and after the copy (before the index build), and read t once it is swapped in or
// after holdFor, like an application's transaction of bounded length; four sessions run short
// transactions throughout. Every read must succeed and count every row.
func TestNoTransactionReadsTheSwappedTableFromAnOlderSnapshot(t *testing.T) {
	const rows, holdFor = 2000, 2 * time.Second
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, sdb,
		"CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(40), KEY ka (a)) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq % 97, CONCAT('row ', seq) FROM "+sandboxtest.Seq(rows),
		"CREATE TABLE o (id INT PRIMARY KEY) ENGINE=InnoDB", "INSERT INTO o VALUES (1)")
	appDB, err := srv.Open(schema)
	if err != nil {
		t.Fatal(err)
	}
	defer appDB.Close()
	app := &snapshotApp{db: appDB, schema: schema, rows: rows}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		app.loop(ctx, &wg, i)
	}
	opts := testOptions(srv, schema, "t")
	opts.Hook = func(ctx context.Context, at Point, _ *state.State) error {
		switch at {
		case PointStart, After(state.StageCopy):
			return app.hold(context.WithoutCancel(ctx), &wg, "a transaction begun at "+string(at), holdFor)
		}
		return nil
	}
	began := time.Now()
	res, err := Run(context.Background(), openControl(t, srv), opts)
	took := time.Since(began)
	time.Sleep(200 * time.Millisecond)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Logf("apply took %s (cut-over lock held %s); %d transactions read t, %d of them took their snapshot before the swap and read t after it",
		took.Round(time.Millisecond), res.Cutover.LockHeld.Round(time.Millisecond), app.reads.Load(), app.spanned.Load())
	if len(app.failures) > 0 {
		t.Errorf("%d read(s) of t failed or counted wrong (0 allowed):\n%s", len(app.failures), strings.Join(app.failures[:min(8, len(app.failures))], "\n"))
	}
	if e := engineOf(t, sdb, schema, "t"); e != "InnoDB" {
		t.Errorf("t is %s after apply, want InnoDB", e)
	}
}
