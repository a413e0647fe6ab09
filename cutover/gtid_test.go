package cutover

import (
	"context"
	"testing"

	"github.com/enginemig/enginemig/sandbox"
	"github.com/enginemig/enginemig/sandbox/sandboxtest"
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
