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

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/plan"
)

// A replica applies every statement of an apply and of the rollback that follows, in each binlog
// format, while the application writes: its SQL thread never stops, and it ends with the
// primary's table. Under STATEMENT and MIXED the defaults capture with triggers. A write of
// enginemig's into a MyISAM table cut off half-way (the change log, and in the rollback the kept
// original) would be binlogged with its error, and a statement-based replica stops on it: with
// ExecWhole's cancellation put back, verification's syncs under the rollback's chunk deadlines
// were such writes (issue 58). apply watches the replica (--replica). ROW, where a row-based
// replica applies what was written whatever the error, is left to the other replica tests
// (TestKeylessReplicaKeepsUp, TestReplicaLag): a minute of CI's time for no risk of this kind.
func TestReplicaRunsThroughApplyAndRollback(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	for _, format := range []string{"STATEMENT", "MIXED"} {
		t.Run(format, func(t *testing.T) {
			primary := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: format})
			replica := sandboxtest.ReplicaForTest(t, primary, sandbox.Options{BinlogFormat: format})
			schema, _ := sandboxtest.FreshDatabase(t, primary)
			db := openControl(t, primary)
			ws := seedAllTypes(t, db, schema, 10000, 4, 58)
			ctx := context.Background()
			watch := watchReplicaThread(t, replica)
			stop := runWriters(ws, appPause)
			opts := testOptions(primary, schema, "t")
			opts.Replicas = append(opts.Replicas, connConfig(replica))
			// The replica is watched for a stopped SQL thread, not for its lag: a statement-based
			// replica on a loaded 2-core machine falls minutes behind, and the default 1 s limit
			// then held the copy back for most of the test's time.
			opts.MaxLag = time.Hour
			res, err := Run(ctx, db, opts)
			if err != nil {
				stop()
				t.Fatalf("apply: %v (the replica: %s)", err, watch())
			}
			if format != "ROW" {
				// Under trigger capture the rollback's syncs into the kept original are slowed
				// (slowSyncsInto), so that they outlast verification's patience for the target
				// (20 ms) whenever they carry more than a few notes: a sync cut off at its
				// deadline is then seen here (without it the syncs were too short for that, and
				// the test passed with the cancellation put back). Replay from a ROW binlog
				// writes through sessions marked the same way and would never catch up.
				slowSyncsInto(t, db, schema, "_t_old")
			}
			time.Sleep(time.Second) // writes that only the InnoDB table receives
			rb, err := rollback.Run(ctx, db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger})
			time.Sleep(300 * time.Millisecond)
			stop()
			if err != nil {
				t.Fatalf("rollback: %v (the replica: %s)", err, watch())
			}
			for _, w := range ws {
				if len(w.failures) > 0 {
					t.Errorf("writer %d: %v", w.id, w.failures[0])
				}
			}
			t.Logf("%s: apply captured %d changes, the rollback %d", format, res.CaptureChanges, rb.CaptureChanges)
			if err := sandbox.SyncReplica(ctx, primary, replica); err != nil {
				t.Fatalf("%v (the replica: %s)", err, watch())
			}
			if stopped := watch(); stopped != "" {
				t.Fatalf("the replica's SQL thread stopped: %s", stopped)
			}
			if engineOf(t, db, schema, "t") != "MyISAM" {
				t.Fatal("not rolled back")
			}
			if diff := sameRows(t, db, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
				t.Fatalf("rolled-back table differs from the reference: %s", diff)
			}
			rdb, err := replica.Open(schema)
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			p, r := tableSum(t, db, schema, "t"), tableSum(t, rdb, schema, "t")
			if p != r {
				t.Fatalf("the replica's t differs from the primary's: primary %s, replica %s", p, r)
			}
			t.Logf("primary and replica: %s", p)
		})
	}
}

// slowSyncsInto makes every row that enginemig's writing sessions (dbconn.OwnWriteVar) insert
// into tbl take 2 ms, as a slow disk would: the syncs of trigger capture, not verification's
// recopies (whose control sessions are not so marked).
func slowSyncsInto(t *testing.T, db *sql.DB, schema, tbl string) {
	t.Helper()
	sandboxtest.MustExec(t, db, "CREATE TRIGGER "+dbconn.QualifiedName(schema, "slow_"+tbl)+" BEFORE INSERT ON "+
		dbconn.QualifiedName(schema, tbl)+" FOR EACH ROW IF "+dbconn.OwnWriteVar+" = 1 THEN SET @slow = SLEEP(0.002); END IF")
}

// A write of enginemig's into a MyISAM table that someone else KILLs (a DBA, a watchdog, a
// host's statement limit) stops the run with what happened and what a replica needs, instead of
// going on as if it had not happened: here a rollback's sync into the kept original, under
// trigger capture (the capture whose syncs write the MyISAM table; the sandbox's ROW binlog would
// otherwise choose binlog capture). Nothing is lost: the same rollback run again finishes with
// every acknowledged write.
func TestKilledWriteIntoMyISAMStopsTheRun(t *testing.T) {
	schema, _ := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	ws := seedAllTypes(t, db, schema, 10000, 3, 59)
	stop := runWriters(ws, appPause)
	defer stop()
	opts := testOptions(srv, schema, "t")
	opts.Capture = plan.CaptureTriggers
	ctx := context.Background()
	if _, err := Run(ctx, db, opts); err != nil {
		t.Fatal(err)
	}
	slowSyncsInto(t, db, schema, "_t_old")
	time.Sleep(time.Second) // writes that only the InnoDB table receives
	// Every sync into _t_old seen is killed until the rollback ends (slowed by slowSyncsInto, a
	// sync is seen running; one that ends between the look and the KILL is not interrupted).
	var killed atomic.Int64
	var first atomic.Value
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The killer looks on a session of its own, and never at a look of its own: MariaDB can show a
	// session's last statement for a moment after it ended, and a look at the pool the writers
	// share once found the killer's previous look there, on a connection a writer had taken by
	// the time the KILL came (the writer's UPDATE was interrupted).
	kconn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer kconn.Close()
	go func() {
		pattern := "%INTO " + dbconn.QualifiedName(schema, "_t_old") + "%SELECT DISTINCT%"
		for kctx.Err() == nil {
			var id int64
			var info string
			if kconn.QueryRowContext(kctx, "SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND INFO NOT LIKE '%PROCESSLIST%' AND COMMAND = 'Query' AND ID <> CONNECTION_ID() LIMIT 1", pattern).Scan(&id, &info) == nil {
				if _, err := kconn.ExecContext(kctx, dbconn.KillQuery(id)); err == nil && killed.Add(1) == 1 {
					first.Store(info)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	rbOpts := rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger}
	_, err = rollback.Run(ctx, db, rbOpts)
	cancel()
	if killed.Load() == 0 {
		t.Fatalf("no sync into _t_old was seen to kill; the rollback returned %v", err)
	}
	t.Logf("%d KILL QUERY, the first of %.120s", killed.Load(), first.Load())
	if !dbconn.IsInterruptedWrite(err) || outcome.CodeOf(err) != outcome.NeedsAttention ||
		!strings.Contains(err.Error(), "interrupted from outside enginemig") || !strings.Contains(err.Error(), "sql_slave_skip_counter") {
		t.Fatalf("the rollback returned %v (code %d); want the interrupted write, what a replica needs, exit 7", err, outcome.CodeOf(err))
	}
	t.Logf("rollback: %v", err)
	if engineOf(t, db, schema, "t") != "InnoDB" {
		t.Fatal("the interrupted rollback swapped")
	}
	sandboxtest.MustExec(t, db, "DROP TRIGGER "+dbconn.QualifiedName(schema, "slow__t_old"))
	if _, err := rollback.Run(ctx, db, rbOpts); err != nil {
		t.Fatalf("the rollback run again: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	for _, w := range ws {
		if len(w.failures) > 0 {
			t.Errorf("writer %d: %v", w.id, w.failures[0])
		}
	}
	if engineOf(t, db, schema, "t") != "MyISAM" {
		t.Fatal("not rolled back")
	}
	if diff := sameRows(t, db, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
		t.Fatalf("rolled-back table differs from the reference: %s", diff)
	}
}

// watchReplicaThread polls the replica's SQL thread until the test ends; the returned function
// says how it was first seen stopped ("" while it never was).
func watchReplicaThread(t *testing.T, replica *sandbox.Server) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if st, err := replica.ReplicaStatus(ctx); err == nil && !st.SQLRunning {
				mu.Lock()
				if seen == "" {
					seen = fmt.Sprintf("at %s: %s", time.Now().Format("15:04:05.000"), st.LastSQLError)
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// tableSum is a table's row count and a checksum over every column of every row, comparable
// across servers of one flavour.
func tableSum(t *testing.T, db *sql.DB, schema, tbl string) string {
	t.Helper()
	cols := make([]string, len(allTypesColumns))
	for i, c := range allTypesColumns {
		cols[i] = "COALESCE(HEX(" + dbconn.QuoteIdent(c) + "), 'NULL')"
	}
	var n, sum sql.NullInt64
	q := "SELECT COUNT(*), SUM(CRC32(CONCAT_WS('|', " + strings.Join(cols, ", ") + "))) FROM " + dbconn.QualifiedName(schema, tbl)
	if err := db.QueryRow(q).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows, checksum %d", n.Int64, sum.Int64)
}
