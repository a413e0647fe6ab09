package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/plan"
)

// TestGalera runs every Galera case on one 3-node cluster (its start is most of the cost).
func TestGalera(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	c := sandboxtest.ClusterForTest(t, 3)
	t.Run("plan", func(t *testing.T) { galeraPlan(t, c) })
	t.Run("refused", func(t *testing.T) { galeraRefused(t, c.Nodes[0]) })
	t.Run("refused where another node holds rows", func(t *testing.T) { galeraRowsElsewhere(t, c) })
	t.Run("apply", func(t *testing.T) { galeraApply(t, c, true) })
	t.Run("apply without secondary indexes", func(t *testing.T) { galeraApply(t, c, false) })
	t.Run("apply with a unique secondary index", func(t *testing.T) { galeraUnique(t, c) })
	t.Run("apply with trigger capture", func(t *testing.T) { galeraTriggerCapture(t, c) })
	t.Run("apply to a table without a key", func(t *testing.T) { galeraKeyless(t, c) })
	t.Run("DDL on a table without a key while a copy chunk holds it", func(t *testing.T) { galeraKeylessDDLOnT(t, c) })
	t.Run("rollback", func(t *testing.T) { galeraRollback(t, c) })
	t.Run("rollback of a table with triggers", func(t *testing.T) { galeraRollbackTriggers(t, c) })
	t.Run("rollback whose rename goes through late", func(t *testing.T) { galeraRollbackLate(t, c) })
	t.Run("rollback that loses the server at the gate", func(t *testing.T) { galeraGateIdle(t, c) })
	t.Run("blocked cut-over", func(t *testing.T) { galeraBlockedCutover(t, c) })
	t.Run("apply that loses the server while its rename waits", func(t *testing.T) { galeraApplyLost(t, c) })
	t.Run("flow control pauses the copy", func(t *testing.T) { galeraFlowControl(t, c) })
	t.Run("write-set row limit", func(t *testing.T) { galeraWriteSetLimit(t, c) })
	t.Run("a transaction the cluster aborts runs again", func(t *testing.T) { galeraRetry(t, c) })
}

// galeraLoad seeds t on node 1 and starts writers there.
func galeraLoad(t *testing.T, c *sandboxtest.Cluster, keys bool) (string, *sql.DB, *ackload.Load, func()) {
	t.Helper()
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	db.SetMaxOpenConns(30)
	l, err := ackload.Create(context.Background(), db, schema, "t", ackload.Config{Writers: 3, RowsPerWriter: 2000, Pause: 300 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if !keys {
		sandboxtest.MustExec(t, db, "ALTER TABLE `"+schema+"`.t DROP KEY `by v`")
	}
	return schema, db, l, l.Start()
}

// runBounded runs apply under ctx (which may carry the test's hooks) and fails the test, instead
// of hanging, should it wedge the node. Apply gets connections of its own, as in production, not
// the application load's pool.
func runBounded(ctx context.Context, t *testing.T, opts Options, c *sandboxtest.Cluster) (*Result, error) {
	t.Helper()
	return runWithin(ctx, t, opts, c, 3*time.Minute)
}

// runWithin is runBounded with a limit of its own.
func runWithin(ctx context.Context, t *testing.T, opts Options, c *sandboxtest.Cluster, limit time.Duration) (*Result, error) {
	t.Helper()
	type ended struct {
		res *Result
		err error
	}
	done := make(chan ended, 1)
	db, err := dbconn.Open(context.Background(), opts.Conn, "", 8)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	go func() { res, err := Run(ctx, db, opts); done <- ended{res, err} }()
	select {
	case e := <-done:
		return e.res, e.err
	case <-time.After(limit):
		for i, n := range c.Nodes {
			t.Logf("node %d:\n%s", i+1, n.ErrorLogTail(10))
		}
		c.Stop() // a wedged node would hold the test's own clean-up too
		t.Fatalf("apply on a Galera node did not return within %s (a wedged node?)", limit)
		return nil, nil
	}
}

// galeraApply: apply on the node holding the rows, under writers: every node ends with the same
// InnoDB table holding every acknowledged write, and the cluster with 3 synced nodes.
func galeraApply(t *testing.T, c *sandboxtest.Cluster, keys bool) {
	schema, db, l, stop := galeraLoad(t, c, keys)
	defer stop()
	time.Sleep(200 * time.Millisecond)
	opts := testOptions(c.Nodes[0], schema, "t")
	if keys {
		// A DDL in total-order isolation on the shadow (OPTIMIZE rebuilds it) brute-force aborts
		// the replay's open transaction on it (error 1213): replay must run that batch again.
		opts.Hook = func(_ context.Context, at Point, _ *state.State) error {
			if at == After(state.StageCopy) { // a hook point (HookPoints) while replay runs
				for i := 0; i < 10; i++ {
					if _, err := db.Exec("OPTIMIZE TABLE `" + schema + "`._t_new"); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	res, err := runBounded(context.Background(), t, opts, c)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Logf("apply: %d rows copied in %s, cut-over %d attempt(s), lock held %s, total %s", res.RowsCopied, res.CopyTime.Round(time.Millisecond),
		res.Cutover.Attempts, res.Cutover.LockHeld.Round(time.Millisecond), res.TotalTime.Round(time.Millisecond))
	checkAcked(t, db, l, stop, schema)
	galeraSame(t, c, schema, "t")
}

// galeraSame checks that every node has t as InnoDB with the same rows, and that the cluster has
// all its nodes synced.
func galeraSame(t *testing.T, c *sandboxtest.Cluster, schema, name string) {
	t.Helper()
	var first string
	for i, n := range c.Nodes {
		db := openControl(t, n)
		ctx := context.Background()
		if err := sandboxtest.WaitSynced(ctx, db, len(c.Nodes)); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1") // read after every write the cluster ordered
		var rows int64
		var tbl string
		var sum sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+schema+"`.`"+name+"`").Scan(&rows); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		if err := conn.QueryRowContext(ctx, "CHECKSUM TABLE `"+schema+"`.`"+name+"`").Scan(&tbl, &sum); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		conn.Close()
		got := fmt.Sprintf("%s, %d rows, checksum %d", engineOf(t, db, schema, name), rows, sum.Int64)
		t.Logf("node %d: %s", i+1, got)
		if i == 0 {
			first = got
			if !strings.HasPrefix(got, "InnoDB, ") {
				t.Errorf("node 1: %s, want InnoDB", got)
			}
		} else if got != first {
			t.Errorf("node %d has %s, node 1 %s", i+1, got, first)
		}
	}
}

// galeraBlockedCutover: a cut-over kept from the table gives up within its budget, and the cluster
// goes on serving writes meanwhile and after: no session of enginemig is left waiting, nothing in
// total order is stuck, the application sees no error. Twice: the application holds LOCK TABLES t
// READ with its other statements queued behind it (the attempts do not ask for the table then,
// see cutover.noTableLockQueue), and an open transaction of the application has read t (its
// metadata lock; the writes go on, and the attempts' LOCK TABLES t WRITE is not granted).
func galeraBlockedCutover(t *testing.T, c *sandboxtest.Cluster) {
	schema, db, l, stop := galeraLoad(t, c, true)
	defer stop()
	opts := testOptions(c.Nodes[0], schema, "t")
	opts.Cutover = cutover.DefaultConfig()
	opts.Cutover.Backoff, opts.Cutover.Attempts = 50*time.Millisecond, 5
	qt := dbconn.QualifiedName(schema, "t")
	probe := startGaleraProbe(t, c, schema)
	// What the cluster's writes take on this machine under the application's load alone: a
	// wedged node (a statement stuck in total order) holds them for a lock timeout (50 s and
	// more), a busy machine for a second or so (1.39 s once in CI, beside other test binaries).
	time.Sleep(3 * time.Second)
	baseline := probe.take()
	for _, hold := range []struct {
		name, says string
		hold       func() (unlock func())
	}{
		{"LOCK TABLES t READ", "wait for its table lock", func() func() {
			_, unlock := holdTable(t, db, "LOCK TABLES "+qt+" READ")
			time.Sleep(100 * time.Millisecond) // the application's statements queue behind it
			return unlock
		}},
		{"an open transaction that read t", "lock not granted in time", func() func() {
			return holdInTransaction(t, db, "SELECT id FROM "+qt+" LIMIT 1")
		}},
	} {
		var unlock func()
		opts.Hook = atCutover(func() { unlock = hold.hold() })
		logs := &logLines{}
		opts.Logger = logs.logger()
		_, err := runBounded(context.Background(), t, opts, c)
		// An attempt may also fail on the probe's write sets waiting to be applied on node 1.
		if outcome.CodeOf(err) != outcome.CutoverPending || !errors.Is(err, cutover.ErrGaveUp) || !strings.Contains(logs.String(), hold.says) {
			unlock()
			t.Fatalf("apply while %s: code %d, %v; want code %d, cutover.ErrGaveUp, an attempt failed with %q\n%s", hold.name, outcome.CodeOf(err), err, outcome.CutoverPending, hold.says, logs)
		}
		if w := waitingSessions(t, db); len(w) > 0 {
			t.Errorf("sessions left waiting after apply gave up (%s): %v", hold.name, w)
		}
		unlock()
		// The application's writes go on at once, on every node.
		begin := time.Now()
		sandboxtest.MustExec(t, db, "INSERT INTO "+qt+" (id, v) VALUES (999999999, 1)", "DELETE FROM "+qt+" WHERE id = 999999999")
		if took := time.Since(begin); took > opts.Cutover.LockWait+opts.Cutover.CatchUp {
			t.Errorf("a write after the failed cut-over (%s) took %s", hold.name, took)
		}
		for i, n := range c.Nodes {
			if err := sandboxtest.WaitSynced(context.Background(), openControl(t, n), len(c.Nodes)); err != nil {
				t.Errorf("node %d after the failed cut-over (%s): %v", i+1, hold.name, err)
			}
		}
	}
	slowest := probe.stop()
	if bound := min(max(time.Second, 4*baseline), 10*time.Second); slowest > bound {
		t.Errorf("a write on another table of the cluster took %s during the failed attempts (bound %s: four times the slowest under the load alone, %s)", slowest, bound, baseline)
	}
	t.Logf("slowest write elsewhere in the cluster during the failed attempts: %s (under the load alone: %s)", slowest, baseline)
	// The same apply again swaps (the shadow was kept current).
	opts.Hook = nil
	if _, err := runBounded(context.Background(), t, opts, c); err != nil {
		t.Fatalf("apply again: %v", err)
	}
	checkAcked(t, db, l, stop, schema)
	galeraSame(t, c, schema, "t")
}

// holdInTransaction runs query in a transaction of its own session, which keeps the metadata locks
// it took until the returned function commits it.
func holdInTransaction(t *testing.T, db *sql.DB, query string) (release func()) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	rows.Close()
	return func() {
		conn.ExecContext(ctx, "COMMIT")
		conn.Close()
	}
}

// startGaleraProbe writes a row every 10 ms into an InnoDB table of its own on every node until
// the returned function is called, which returns the slowest write.
// galeraProbe is a write on every node every 10 ms; take returns the slowest since the last take
// (or the start), stop ends the writes and returns the slowest since the last take.
type galeraProbe struct {
	take, stop func() time.Duration
}

func startGaleraProbe(t *testing.T, c *sandboxtest.Cluster, schema string) galeraProbe {
	t.Helper()
	sandboxtest.MustExec(t, openControl(t, c.Nodes[0]), "CREATE TABLE `"+schema+"`.probe (id INT AUTO_INCREMENT PRIMARY KEY, node INT) ENGINE=InnoDB")
	var mu sync.Mutex
	var slowest time.Duration
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		db := openControl(t, n)
		waitTable(t, db, schema, "probe")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-quit:
					return
				case <-time.After(10 * time.Millisecond):
				}
				begin := time.Now()
				if _, err := db.Exec("INSERT INTO `"+schema+"`.probe (node) VALUES (?)", i+1); err != nil {
					t.Errorf("probe write on node %d: %v", i+1, err)
					return
				}
				mu.Lock()
				slowest = max(slowest, time.Since(begin))
				mu.Unlock()
			}
		}()
	}
	take := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		s := slowest
		slowest = 0
		return s
	}
	return galeraProbe{take: take, stop: func() time.Duration {
		close(quit)
		wg.Wait()
		return take()
	}}
}

// waitingSessions lists the sessions waiting in total order or for a metadata lock on the node
// (the application's statements behind its own LOCK TABLES ... READ wait for the table-level lock).
func waitingSessions(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT ID, STATE, COALESCE(INFO, '') FROM information_schema.PROCESSLIST
		WHERE STATE LIKE '%isolation%' OR STATE = 'Waiting for table metadata lock'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id int64
		var state, info string
		rows.Scan(&id, &state, &info)
		out = append(out, fmt.Sprintf("%d %s: %s", id, state, info))
	}
	return out
}

// galeraPlan: plan on a node says who holds the rows of each MyISAM table, where to run apply,
// and blocks where the rows are elsewhere or spread over several nodes.
func galeraPlan(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	dbs := make([]*sql.DB, len(c.Nodes))
	for i, n := range c.Nodes {
		dbs[i] = openControl(t, n)
	}
	sandboxtest.MustExec(t, dbs[0],
		"CREATE TABLE `"+schema+"`.here (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"CREATE TABLE `"+schema+"`.spread (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO `"+schema+"`.here VALUES (1, 1), (2, 2), (3, 3)",
		"INSERT INTO `"+schema+"`.spread VALUES (1, 1)")
	waitTable(t, dbs[2], schema, "spread") // the CREATEs reach the other nodes, the rows do not
	waitTable(t, dbs[1], schema, "spread")
	sandboxtest.MustExec(t, dbs[1], "INSERT INTO `"+schema+"`.spread VALUES (2, 2)")

	inspect := func(db *sql.DB) *plan.Plan {
		t.Helper()
		p, err := plan.Inspect(context.Background(), db, plan.Options{Databases: []string{schema}, OpenNode: func(ctx context.Context, addr string) (*sql.DB, error) {
			for _, n := range c.Nodes {
				if strings.HasSuffix(addr, ":"+strconv.Itoa(n.Port)) {
					return n.Open("")
				}
			}
			t.Errorf("plan asked for node %s, which is not in the cluster", addr)
			return nil, sql.ErrConnDone
		}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A node that just joined may be missing from wsrep_incoming_addresses for a moment.
	p := inspect(dbs[0])
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && (p.Server.Galera == nil || len(p.Server.Galera.Nodes) != 3 || p.Server.Galera.State != "Synced"); {
		time.Sleep(500 * time.Millisecond)
		p = inspect(dbs[0])
	}
	g := p.Server.Galera
	if g == nil || g.Size != 3 || g.Status != "Primary" || g.State != "Synced" || len(g.Nodes) != 3 || g.Self != "127.0.0.1:"+strconv.Itoa(c.Nodes[0].Port) || g.OSUMethod != "TOI" {
		t.Fatalf("plan's view of the cluster: %+v", g)
	}
	var text strings.Builder
	plan.WriteText(&text, p)
	t.Log(text.String())
	here, _ := p.Table(schema, "here")
	spread, _ := p.Table(schema, "spread")
	if f := findingsOf(here.Findings, "galera-rows"); len(f) != 1 || f[0].Severity != plan.Info || !strings.Contains(f[0].Message, "(3) are on this node") {
		t.Errorf("rows on this node only: %+v", f)
	}
	if f := findingsOf(spread.Findings, "galera-rows"); len(f) != 1 || f[0].Severity != plan.Blocker || !strings.Contains(f[0].Message, "several nodes") {
		t.Errorf("rows on two nodes: %+v", f)
	}
	if !strings.Contains(text.String(), "here on each node: 127.0.0.1:"+strconv.Itoa(c.Nodes[0].Port)+": 3 rows MyISAM") {
		t.Error("the report does not list the rows per node")
	}
	// On a node without the rows, plan points at the node that has them.
	p = inspect(dbs[2])
	here, _ = p.Table(schema, "here")
	if f := findingsOf(here.Findings, "galera-rows"); len(f) != 1 || f[0].Severity != plan.Blocker || !strings.Contains(f[0].Message, "on another node (127.0.0.1:"+strconv.Itoa(c.Nodes[0].Port)) {
		t.Errorf("rows on another node: %+v", f)
	}
}

func findingsOf(fs []plan.Finding, id string) []plan.Finding {
	var out []plan.Finding
	for _, f := range fs {
		if f.Check == id {
			out = append(out, f)
		}
	}
	return out
}

// waitTable waits until a replicated CREATE TABLE has reached the node behind db.
func waitTable(t *testing.T, db *sql.DB, schema, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !tableExists(t, db, schema, name); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s.%s did not reach the node", schema, name)
		}
	}
}

// galeraRowsElsewhere: apply refuses, before it changes anything, a table of which another node
// holds rows too (the swap would move them aside there).
func galeraRowsElsewhere(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db1, db2 := openControl(t, c.Nodes[0]), openControl(t, c.Nodes[1])
	sandboxtest.MustExec(t, db1, "CREATE TABLE `"+schema+"`.t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO `"+schema+"`.t VALUES (1, 1)")
	waitTable(t, db2, schema, "t")
	sandboxtest.MustExec(t, db2, "INSERT INTO `"+schema+"`.t VALUES (2, 2)")
	_, err := runBounded(context.Background(), t, testOptions(c.Nodes[0], schema, "t"), c)
	if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "[galera-rows]") || !strings.Contains(err.Error(), "several nodes") {
		t.Fatalf("apply with rows on two nodes: code %d, %v", outcome.CodeOf(err), err)
	}
	if engineOf(t, db1, schema, "t") != "MyISAM" || tableExists(t, db1, schema, "_t_new") {
		t.Fatal("a refused apply changed the table")
	}
}

// galeraRefused: apply with trigger capture of a table with a unique secondary index (the copy's
// INSERT IGNORE cannot keep it equal with the index in the shadow from the start), and of a table
// without a key whose unique index cannot be in the shadow from the start, refuses before it
// changes anything.
func galeraRefused(t *testing.T, node *sandbox.Server) {
	db := openControl(t, node)
	schema, _ := sandboxtest.FreshDatabase(t, node)
	sandboxtest.MustExec(t, db, "CREATE TABLE `"+schema+"`.t (id INT PRIMARY KEY, v INT, UNIQUE KEY uv (v)) ENGINE=MyISAM",
		"INSERT INTO `"+schema+"`.t VALUES (1, 1), (2, 2)")

	opts := testOptions(node, schema, "t")
	opts.Capture = "triggers"
	// Should it not be refused, a run that wedged the node would never return: fail instead.
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), db, opts); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		node.Stop() // a wedged node would hold the test's own clean-up too
		t.Fatal("apply on a Galera node did not return within 2 minutes (a wedged cut-over?)")
	}
	if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "[galera-capture]") || !strings.Contains(err.Error(), "unique index `uv`") {
		t.Fatalf("apply with trigger capture of a table with a unique secondary index on a Galera node: got code %d %v, want a refusal by the galera-capture check", outcome.CodeOf(err), err)
	}
	if engineOf(t, db, schema, "t") != "MyISAM" || tableExists(t, db, schema, "_t_new") {
		t.Fatal("a refused apply changed the table")
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", opts.StateSchema).Scan(&n)
	if n != 0 {
		t.Error("state schema created by a refused migration")
	}
	// A table whose only unique index has a NULLable column has no key: written with plain
	// INSERTs into a shadow with that index, the copy would stop at a duplicate value.
	sandboxtest.MustExec(t, db, "CREATE TABLE `"+schema+"`.u (id INT NOT NULL, uq INT NULL, KEY id (id), UNIQUE KEY uq (uq)) ENGINE=MyISAM",
		"INSERT INTO `"+schema+"`.u VALUES (1, 1), (2, NULL), (3, NULL)")
	_, err = Run(context.Background(), db, testOptions(node, schema, "u"))
	if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "unique index `uq` addresses no row") {
		t.Fatalf("apply of a keyless table with a unique index on a Galera node: got code %d %v, want a refusal naming the index", outcome.CodeOf(err), err)
	}
	if engineOf(t, db, schema, "u") != "MyISAM" || tableExists(t, db, schema, "_u_new") {
		t.Fatal("a refused apply changed the table")
	}
}
