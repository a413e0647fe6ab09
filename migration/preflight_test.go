package migration

import (
	"context"
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/plan"
)

// Every refusal must explain itself, carry its exit code and leave no trace: no shadow, no
// sentry, no state table.
func TestPreflightRefusalsChangeNothing(t *testing.T) {
	schema, _ := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, db,
		"USE `"+schema+"`",
		"CREATE TABLE inno (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE aria (id INT PRIMARY KEY) ENGINE="+otherEngine(srv),
		"CREATE TABLE base (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE VIEW v AS SELECT * FROM base",
		"CREATE TABLE left1 (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE TABLE _left1_new (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE left2 (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE TABLE _left2_old (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE TABLE pergroup (grp INT NOT NULL, n INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (grp, n)) ENGINE=MyISAM",
		"CREATE TABLE part1 (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE TABLE merged (id INT NOT NULL, KEY (id)) ENGINE=MRG_MyISAM UNION=(part1)",
	)
	// A trigger created from a latin1 session under a non-ASCII name cannot be created again byte
	// for byte (the only triggers apply does not carry).
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET NAMES latin1", "CREATE TABLE `" + schema + "`.trig (id INT PRIMARY KEY, n INT) ENGINE=MyISAM",
		"CREATE TRIGGER `" + schema + "`.`tr\xe9g_bi` BEFORE INSERT ON `" + schema + "`.trig FOR EACH ROW SET NEW.n = 1"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
	cases := []struct {
		table string
		code  outcome.Code
		want  string
	}{
		{"inno", outcome.Refused, "already InnoDB"},
		{"aria", outcome.Refused, "not MyISAM"},
		{"v", outcome.Refused, "is a view"},
		{"trig", outcome.Refused, "character_set_client=latin1"},
		{"left1", outcome.Refused, "_left1_new` exists"},
		{"left2", outcome.Refused, "_left2_old` exists"},
		{"missing", outcome.Usage, "does not exist"},
		{"pergroup", outcome.Refused, "[autoinc-not-leading]"},
		{"part1", outcome.Refused, "[merge-member]"},
		{"merged", outcome.Refused, "not MyISAM"},
	}
	for _, c := range cases {
		t.Run(c.table, func(t *testing.T) {
			opts := testOptions(srv, schema, c.table)
			opts.StateSchema = "_state_" + c.table
			_, err := Run(context.Background(), db, opts)
			if err == nil {
				t.Fatal("migration was not refused")
			}
			if outcome.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got code %d %q, want code %d containing %q", outcome.CodeOf(err), err, c.code, c.want)
			}
			if !strings.Contains(err.Error(), ";") {
				t.Errorf("no remedy in %q", err)
			}
			if tableExists(t, db, schema, "_"+c.table+"_new") && c.table != "left1" {
				t.Error("shadow created")
			}
			var n int
			db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", opts.StateSchema).Scan(&n)
			if n != 0 {
				t.Error("state schema created by a refused migration")
			}
		})
	}
	_, err = Run(context.Background(), db, testOptions(srv, "no_such_db", "t"))
	if outcome.CodeOf(err) != outcome.Usage || !strings.Contains(err.Error(), "database `no_such_db` does not exist") {
		t.Fatalf("unknown database: %v", err)
	}
}

// --capture binlog on a server whose binlog cannot be used refuses, saying why, and changes nothing.
func TestPreflightRefusesBinlogCaptureWithoutRowBinlog(t *testing.T) {
	for _, c := range []struct {
		name string
		opts sandbox.Options
		want string
	}{
		{"off", sandbox.Options{BinlogFormat: "OFF"}, "log_bin is OFF"},
		{"statement", sandbox.Options{BinlogFormat: "STATEMENT"}, "binlog_format=STATEMENT (need ROW)"},
		{"minimal", sandbox.Options{RowImage: "MINIMAL"}, "binlog_row_image=MINIMAL (need FULL)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := sandboxtest.ForTest(t, c.opts)
			schema, db := sandboxtest.FreshDatabase(t, s)
			sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MyISAM")
			opts := testOptions(s, schema, "t")
			opts.Capture = plan.CaptureBinlog
			_, err := Run(context.Background(), db, opts)
			if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %d %v", outcome.CodeOf(err), err)
			}
			if tableExists(t, db, schema, "_t_new") || engineOf(t, db, schema, "t") != "MyISAM" {
				t.Fatal("something changed")
			}
		})
	}
}

func TestDryRunLeavesTableAndDropsShadow(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), KEY v (v)) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM "+sandboxtest.Seq(5000))
	opts := testOptions(srv, schema, "t")
	opts.DryRun = true
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsCopied != 5000 || res.Cutover != nil || !res.DryRun {
		t.Fatalf("result %+v", res)
	}
	if tableExists(t, db, schema, "_t_new") || tableExists(t, db, schema, "_t_old") || engineOf(t, db, schema, "t") != "MyISAM" {
		t.Fatal("dry run changed tables")
	}
	states, err := state.NewStore(db, opts.StateSchema).List(context.Background(), schema, "t")
	if err != nil || len(states) != 1 || states[0].Stage != state.StageDryRun || states[0].RowsCopied != 5000 {
		t.Fatalf("state %+v %v", states, err)
	}
}

func TestPreflightRefusesMissingPrivileges(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, sdb,
		"CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE USER IF NOT EXISTS 'weak'@'127.0.0.1' IDENTIFIED BY 'pw'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, LOCK TABLES ON *.* TO 'weak'@'127.0.0.1'")
	opts := testOptions(srv, schema, "t")
	opts.Conn.User, opts.Conn.Password, opts.Conn.PasswordSet = "weak", "pw", true
	db, err := dbconn.Open(context.Background(), opts.Conn, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = Run(context.Background(), db, opts)
	if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "REPLICATION SLAVE") { // neither capture: the binlog may not be read, triggers not created
		t.Fatalf("got %d %v", outcome.CodeOf(err), err)
	}
	if tableExists(t, sdb, schema, "_t_new") {
		t.Fatal("shadow created")
	}
}

// otherEngine is a non-transactional engine other than MyISAM: Aria on MariaDB, MEMORY on MySQL.
func otherEngine(s *sandbox.Server) string {
	if s.Flavour().MySQL() {
		return "MEMORY"
	}
	return "Aria"
}
