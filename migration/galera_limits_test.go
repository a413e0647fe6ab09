package migration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/pace/throttle"
)

// The Galera subtests of the copy's limits: flow control, write-set size, aborted transactions
// (run by TestGalera on its cluster).

// galeraFlowControl: while a node cannot apply (its applier waits behind a LOCK TABLES there)
// and its receive queue passes gcs.fc_limit, flow control pauses the cluster, and the copy's
// throttle holds the copy back until the cluster runs again.
func galeraFlowControl(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db1, db2 := openControl(t, c.Nodes[0]), openControl(t, c.Nodes[1])
	sandboxtest.MustExec(t, db1, "CREATE TABLE `"+schema+"`.w (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB")
	waitTable(t, db2, schema, "w")
	thr := throttle.New(db1, throttle.Config{Galera: true, Interval: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := thr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer thr.Stop()
	if st := thr.Status(); st.Throttled {
		t.Fatalf("throttled on an idle cluster: %s", st.Reason)
	}
	_, unlock := holdTable(t, db2, "LOCK TABLES `"+schema+"`.w WRITE")
	writes := make(chan error, 1)
	go func() { // each a write set node 2 cannot apply while the table is locked there
		for i := 0; i < 60; i++ {
			if _, err := db1.Exec("INSERT INTO `" + schema + "`.w (v) VALUES (1)"); err != nil {
				writes <- err
				return
			}
		}
		writes <- nil
	}()
	waitThrottled := func(want bool) string {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if st := thr.Status(); st.Throttled == want {
				return st.Reason
			}
		}
		unlock()
		t.Fatalf("throttle not %v within 20 s: %+v", want, thr.Status())
		return ""
	}
	reason := waitThrottled(true)
	t.Logf("throttled: %s", reason)
	if !strings.Contains(reason, "flow control") {
		t.Errorf("throttled for another reason: %s", reason)
	}
	unlock()
	if err := <-writes; err != nil {
		t.Fatalf("writes on node 1: %v", err)
	}
	waitThrottled(false)
}

// galeraWriteSetLimit: with wsrep_max_ws_rows set, the copy's chunks stay below it (a chunk over
// it fails: "Maximum writeset size exceeded").
func galeraWriteSetLimit(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	sandboxtest.MustExec(t, db, "CREATE TABLE `"+schema+"`.t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO `"+schema+"`.t SELECT seq, seq FROM "+sandboxtest.Seq(40000),
		"SET GLOBAL wsrep_max_ws_rows = 4000")
	defer db.Exec("SET GLOBAL wsrep_max_ws_rows = 0")
	// The limit bites: one statement over it fails.
	sandboxtest.MustExec(t, db, "CREATE TABLE `"+schema+"`.big (id INT PRIMARY KEY) ENGINE=InnoDB")
	if _, err := db.Exec("INSERT INTO `" + schema + "`.big SELECT id FROM `" + schema + "`.t WHERE id <= 4500"); err == nil || !strings.Contains(err.Error(), "wsrep_max_ws_rows") {
		t.Fatalf("a write set of 4500 rows with wsrep_max_ws_rows=4000: %v", err)
	}
	res, err := runBounded(context.Background(), t, testOptions(c.Nodes[0], schema, "t"), c)
	if err != nil {
		t.Fatalf("apply with wsrep_max_ws_rows=4000: %v", err)
	}
	t.Logf("copied %d rows", res.RowsCopied)
	galeraSame(t, c, schema, "t")
}

// galeraRetry: a transaction on node 1 whose row node 2 commits first is aborted by the cluster
// (brute-force abort when node 2's write set is applied, or failed certification: error 1213);
// dbconn.RetryClusterAborts, the one place enginemig retries such work (replay batches, copy
// chunks), runs it again, and the row holds both changes, neither lost nor doubled.
func galeraRetry(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db1, db2 := openControl(t, c.Nodes[0]), openControl(t, c.Nodes[1])
	w := "`" + schema + "`.w"
	sandboxtest.MustExec(t, db1, "CREATE TABLE "+w+" (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO "+w+" VALUES (1, 0)")
	waitTable(t, db2, schema, "w")
	// The row too: node 2's UPDATE of a row not yet applied there changes nothing, replicates
	// nothing, and the first run commits without a conflict (seen once under load).
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if db2.QueryRow("SELECT COUNT(*) FROM " + w + " WHERE id = 1").Scan(&n); n == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("node 2: the row is not there 10 s after its INSERT on node 1")
		}
	}
	runs := 0
	var first error
	err := dbconn.RetryClusterAborts(context.Background(), func() error {
		runs++
		tx, err := db1.Begin()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.Exec("UPDATE " + w + " SET v = v + 1 WHERE id = 1"); err != nil {
			return err
		}
		if runs == 1 {
			if _, err := db2.Exec("UPDATE " + w + " SET v = v + 10 WHERE id = 1"); err != nil {
				return err
			}
		}
		err = tx.Commit()
		if runs == 1 {
			first = err
		}
		return err
	})
	if err != nil || runs != 2 || !dbconn.IsClusterAbort(first) {
		t.Fatalf("retried transaction: %v after %d run(s), the first ended with %v", err, runs, first)
	}
	var v int
	if err := db1.QueryRow("SELECT v FROM " + w + " WHERE id = 1").Scan(&v); err != nil || v != 11 {
		t.Fatalf("v = %d (%v), want 11: both changes once", v, err)
	}
	t.Logf("the first run ended with %v; the second committed", first)
}
