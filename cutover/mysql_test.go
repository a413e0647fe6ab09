package cutover

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// gtidServer is a MySQL server with its defaults (gtid_mode=ON, enforce_gtid_consistency=ON):
// the package's server when the tests run on MySQL, else one of its own.
func gtidServer(t *testing.T) *sandbox.Server {
	if srv.Flavour().MySQL() {
		return srv
	}
	return sandboxtest.ForFlavour(t, sandbox.MySQL97, sandbox.Options{})
}

// Both directions of the swap on a server that enforces GTID consistency: MyISAM to InnoDB (the
// cut-over) and InnoDB back to MyISAM (the rollback). A LOCK TABLES that write-locks an InnoDB and
// a MyISAM table in one statement fails there with Error 1785, so the sentry locked beside the
// table must have the table's engine.
func TestSwapBothWaysUnderGTIDConsistency(t *testing.T) {
	s := gtidServer(t)
	_, db := sandboxtest.FreshDatabase(t, s)
	var enforce string
	if err := db.QueryRow("SELECT @@enforce_gtid_consistency").Scan(&enforce); err != nil || enforce != "ON" {
		t.Fatalf("enforce_gtid_consistency=%s %v: the test proves nothing", enforce, err)
	}
	swapBothWays(t, s, db)
}

// MariaDB's GTID strict mode is about the order of GTIDs, not engines: both swaps work there too.
func TestSwapBothWaysUnderMariaDBGTIDStrictMode(t *testing.T) {
	f := srv.Flavour()
	if f.MySQL() {
		f = sandbox.MariaDB1011
	}
	s := sandboxtest.ForFlavour(t, f, sandbox.Options{ExtraArgs: []string{"--gtid-strict-mode=ON"}})
	_, db := sandboxtest.FreshDatabase(t, s)
	var strict int
	if err := db.QueryRow("SELECT @@gtid_strict_mode").Scan(&strict); err != nil || strict != 1 {
		t.Fatalf("gtid_strict_mode=%d %v", strict, err)
	}
	swapBothWays(t, s, db)
}

func swapBothWays(t *testing.T, s *sandbox.Server, db *sql.DB) {
	t.Helper()
	schema := ""
	db.QueryRow("SELECT DATABASE()").Scan(&schema)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(4000),
		"CREATE TABLE _t_new (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
		"INSERT INTO _t_new SELECT * FROM t")
	cfg := fastConfig()
	cfg.Attempts = 2
	if _, err := Run(context.Background(), db, swapOf(schema), caughtUp{}, cfg, nil); err != nil {
		t.Fatalf("cut-over: %v", err)
	}
	if engine(db, "t") != "InnoDB" || engine(db, "_t_old") != "MyISAM" {
		t.Fatalf("after the cut-over: t=%s _t_old=%s", engine(db, "t"), engine(db, "_t_old"))
	}
	back := Swap{Schema: schema, From: "t", To: "_t_old", Aside: "_t_new", Sentry: "t_emswap"}
	res, err := Run(context.Background(), db, back, caughtUp{}, cfg, nil)
	if err != nil {
		t.Fatalf("swap back: %v", err)
	}
	if engine(db, "t") != "MyISAM" || engine(db, "_t_new") != "InnoDB" || engine(db, "t_emswap") != "" {
		t.Fatalf("after the swap back: t=%s _t_new=%s t_emswap=%s", engine(db, "t"), engine(db, "_t_new"), engine(db, "t_emswap"))
	}
	t.Logf("%s: swap back held the lock %s", s.Flavour(), res.LockHeld)
}

// A statement whose text is not valid UTF-8 (an application's binary values) makes MySQL's
// information_schema.PROCESSLIST fail as a whole (Error 3854). The swap watches the process list
// (the rename must be queued before the lock goes; long queries on the table make it wait), so it
// must still see both: here a long statement with binary text mentions the table.
func TestSwapSeesProcessListWithBinaryStatementText(t *testing.T) {
	s := gtidServer(t)
	_, db := sandboxtest.FreshDatabase(t, s)
	schema := ""
	db.QueryRow("SELECT DATABASE()").Scan(&schema)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(2000),
		"CREATE TABLE _t_new (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
		"INSERT INTO _t_new SELECT * FROM t")
	binary := []byte{0xaa, 0x17, 0xf2, 0x9c, 0x83, 0xa3}
	done := make(chan error, 1)
	go func() {
		// About 1.2 s on t; the driver interpolates the bytes into the statement text.
		_, err := db.Exec("SELECT COUNT(*) FROM t WHERE SLEEP(0.0006) = 0 AND ? <> ''", binary)
		done <- err
	}()
	time.Sleep(400 * time.Millisecond)
	ids, err := LongQueries(context.Background(), db, schema, "t", 200*time.Millisecond)
	if err != nil || len(ids) != 1 {
		t.Fatalf("the long statement on t was not found: %v %v", ids, err)
	}
	cfg := fastConfig()
	cfg.Attempts, cfg.Backoff = 3, time.Second // waits up to 3 s for the long statement
	// Still running, with binary text, during the swap; in another database, so not on t.
	_, other := sandboxtest.FreshDatabase(t, s)
	go other.Exec("SELECT SLEEP(3), ?", binary)
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	res, err := Run(context.Background(), db, swapOf(schema), caughtUp{}, cfg, nil)
	if err != nil {
		t.Fatalf("swap with binary statement text in the process list: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if engine(db, "t") != "InnoDB" {
		t.Fatal("not swapped")
	}
	t.Logf("%s: swap took %s (waited for the long statement), lock held %s, %d attempt(s)", s.Flavour(), time.Since(start), res.LockHeld, res.Attempts)
}
