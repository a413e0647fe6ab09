package migration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/sandbox/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
)

// A replica applies every statement of an apply and of the rollback that follows, in each binlog
// format, while the application writes: its SQL thread never stops, and it ends with the
// primary's table. Under STATEMENT and MIXED the defaults capture with triggers; under ROW from
// the binlog. A write of enginemig's into a MyISAM table cut off half-way (the change log, and in
// the rollback the kept original) would be binlogged with its error, and a statement-based
// replica stops on it: with ExecWhole's cancellation put back, verification's syncs under the
// rollback's chunk deadlines were such writes (issue 58). apply watches the replica (--replica).
func TestReplicaRunsThroughApplyAndRollback(t *testing.T) {
	for _, format := range []string{"STATEMENT", "MIXED", "ROW"} {
		t.Run(format, func(t *testing.T) {
			primary := sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: format})
			replica := sandboxtest.ReplicaForTest(t, primary, sandbox.Options{BinlogFormat: format})
			schema, _ := sandboxtest.FreshDatabase(t, primary)
			db := openControl(t, primary)
			ws := seedAllTypes(t, db, schema, 20000, 4, 58)
			ctx := context.Background()
			watch := watchReplicaThread(t, replica)
			stop := runWriters(ws, appPause)
			opts := testOptions(primary, schema, "t")
			opts.Replicas = append(opts.Replicas, connConfig(replica))
			res, err := Run(ctx, db, opts)
			if err != nil {
				stop()
				t.Fatalf("apply: %v (the replica: %s)", err, watch())
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
