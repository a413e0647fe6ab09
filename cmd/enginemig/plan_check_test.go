package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/plan"
)

// TestPlanCheckLocksTheDoor runs plan --check as a nightly job would, with an account whose rights
// are on one database (a hosted DBA's) and as root: exit 9 naming the MyISAM tables while any is
// the application's; after apply (defaults), exit 0 with the kept original named as such and the
// settings that keep MyISAM out, and the first of those, run as printed, makes the server refuse
// a new MyISAM table.
func TestPlanCheckLocksTheDoor(t *testing.T) {
	// A shared host's server: no binlog, so the database's own account converts with trigger
	// capture. The sandbox's MySQL enforces GTID consistency, which refuses trigger capture: there
	// the binlog stays on and root converts (the checks still run as the database's account).
	opts, mysql := sandbox.Options{BinlogFormat: "OFF"}, false
	if f, err := sandboxtest.Flavour(); err == nil && f.MySQL() {
		opts, mysql = sandbox.Options{}, true
	}
	srv := sandboxtest.ForTest(t, opts)
	schema, root := sandboxtest.FreshDatabase(t, srv)
	other, _ := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, root,
		"CREATE TABLE posts (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, body VARCHAR(200)) ENGINE=MyISAM",
		"INSERT INTO posts (body) SELECT CONCAT('post ', seq) FROM "+sandboxtest.Seq(2000),
		"CREATE TABLE users (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE "+dbconn.QuoteIdent(other)+".legacy (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE USER 'site'@'%' IDENTIFIED BY 'pw'", "GRANT ALL PRIVILEGES ON "+dbconn.QuoteIdent(schema)+".* TO 'site'@'%'")
	empty := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	as := func(user, password string) []string {
		return []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", user, "--password", password, "--ssl-mode", "DISABLED"}
	}
	site, rootConn := as("site", "pw"), as("root", "")
	check := func(t *testing.T, conn []string, extra ...string) (checkReport, string, outcome.Code) {
		t.Helper()
		out, code := runCLI(t, append(append([]string{"plan", "--check", "--output", "json"}, conn...), extra...)...)
		var r checkReport
		if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &r); err != nil {
			t.Fatalf("plan --check --output json: %v\n%s", err, out)
		}
		return r, out, code
	}

	t.Run("MyISAM left: exit 9, each table named", func(t *testing.T) {
		r, out, code := check(t, site)
		if code != outcome.MyISAMRemains || r.ApplicationTables != 1 || len(r.MyISAMTables) != 1 || r.MyISAMTables[0].Table != "posts" || r.MyISAMTables[0].Rows != 2000 {
			t.Fatalf("as the database's account: exit %d, %+v\n%s", code, r, out)
		}
		if r.KeepMyISAMOut != nil {
			t.Errorf("advice on keeping MyISAM out while tables remain: %+v", r.KeepMyISAMOut)
		}
		r, out, code = check(t, rootConn)
		if code != outcome.MyISAMRemains || r.ApplicationTables != 2 {
			t.Fatalf("as root: exit %d, %+v\n%s", code, r, out)
		}
		text, code, err := runCLIErr(append([]string{"plan", "--check"}, rootConn...)...)
		for _, want := range []string{schema + ".posts: still MyISAM, 2000 rows", other + ".legacy: still MyISAM"} {
			if code != outcome.MyISAMRemains || !strings.Contains(text, want) {
				t.Errorf("text report (exit %d) lacks %q:\n%s", code, want, text)
			}
		}
		dbs := []string{schema, other}
		sort.Strings(dbs)
		if want := "enginemig plan --database " + strings.Join(dbs, ","); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error (with its remedy) lacks %q: %v", want, err)
		}
	})
	t.Run("bad input changes nothing", func(t *testing.T) {
		if out, code := runCLI(t, append(append([]string{"plan", "--check"}, site...), "stray")...); code != outcome.Usage {
			t.Errorf("a stray argument: exit %d, want %d\n%s", code, outcome.Usage, out)
		}
	})
	t.Run("converted: exit 0, the kept original named, the door's settings", func(t *testing.T) {
		converter := site
		if mysql {
			converter = rootConn
		}
		planFile := filepath.Join(t.TempDir(), "plan.json")
		if out, code := runCLI(t, append(append([]string{"plan"}, converter...), "--database", schema, "--out", planFile)...); code != outcome.OK {
			t.Fatalf("plan: exit %d\n%s", code, out)
		}
		out, code := runCLI(t, append(append([]string{"apply"}, converter...), "--plan", planFile, "--no-progress")...)
		if code != outcome.OK || !strings.Contains(out, "No MyISAM table of the application's remains.") || !strings.Contains(out, "To keep MyISAM out of this server") {
			t.Fatalf("apply --plan: exit %d, its summary does not say how to keep MyISAM out:\n%s", code, out)
		}
		r, out, code := check(t, site)
		if code != outcome.OK || r.ApplicationTables != 0 || len(r.MyISAMTables) != 1 || !r.MyISAMTables[0].KeptOriginal || r.MyISAMTables[0].Table != "_posts_old" {
			t.Fatalf("exit %d, %+v\n%s", code, r, out)
		}
		if len(r.KeepMyISAMOut) == 0 {
			t.Fatalf("no advice on keeping MyISAM out:\n%s", out)
		}
		text, _ := runCLI(t, append([]string{"plan", "--check"}, site...)...)
		if !strings.Contains(text, "the original kept for a rollback (enginemig cleanup -D "+schema+" -t posts --drop-old") {
			t.Errorf("text report:\n%s", text)
		}
		// The other database still holds MyISAM: root's check fails, limited to this one it passes.
		if _, _, code := check(t, rootConn); code != outcome.MyISAMRemains {
			t.Errorf("root's check of every database: exit %d, want %d", code, outcome.MyISAMRemains)
		}
		if _, _, code := check(t, rootConn, "--database", schema); code != outcome.OK {
			t.Errorf("root's check of %s: exit %d, want 0", schema, code)
		}
		door := r.KeepMyISAMOut[0]
		if srv.Flavour().MySQL() {
			if door.Setting != "disabled_storage_engines" || !strings.Contains(door.Persistent, "MyISAM") {
				t.Fatalf("MySQL's first step: %+v", door)
			}
			return // not dynamic: proven below on a server started with it
		}
		if door.Setting != "enforce_storage_engine" {
			t.Fatalf("MariaDB's first step: %+v", door)
		}
		sandboxtest.MustExec(t, root, door.Statement)
		t.Cleanup(func() { root.Exec("SET GLOBAL enforce_storage_engine = NULL") })
		refusesMyISAM(t, srv, schema)
	})
	if srv.Flavour().MySQL() {
		t.Run("MySQL's disabled_storage_engines, as printed", func(t *testing.T) {
			setting := strings.TrimPrefix(mysqlDoor(t), "[mysqld] ")
			name, value, _ := strings.Cut(setting, " = ")
			locked := sandboxtest.ForTest(t, sandbox.Options{ExtraArgs: []string{"--" + strings.ReplaceAll(name, "_", "-") + "=" + strings.Trim(value, `"`)}})
			s, _ := sandboxtest.FreshDatabase(t, locked)
			refusesMyISAM(t, locked, s)
		})
	}
}

// mysqlDoor is the configuration line plan --check prints first for MySQL.
func mysqlDoor(t *testing.T) string {
	t.Helper()
	door := plan.KeepMyISAMOut("mysql")[0]
	if door.Setting != "disabled_storage_engines" {
		t.Fatalf("MySQL's first step: %+v", door)
	}
	return door.Persistent
}

// refusesMyISAM checks, in a new session of srv, that CREATE TABLE ... ENGINE=MyISAM fails under
// NO_ENGINE_SUBSTITUTION and makes an InnoDB table without it.
func refusesMyISAM(t *testing.T, srv *sandbox.Server, schema string) {
	t.Helper()
	db, err := srv.Open(schema)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sandboxtest.MustExec(t, db, "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'")
	if _, err := db.Exec("CREATE TABLE sneaked_in (id INT PRIMARY KEY) ENGINE=MyISAM"); err == nil {
		t.Fatal("CREATE TABLE ... ENGINE=MyISAM succeeded under NO_ENGINE_SUBSTITUTION")
	}
	sandboxtest.MustExec(t, db, "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'", "CREATE TABLE sneaked_in (id INT PRIMARY KEY) ENGINE=MyISAM")
	var engine string
	if err := db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'sneaked_in'", schema).Scan(&engine); err != nil || engine != "InnoDB" {
		t.Fatalf("without NO_ENGINE_SUBSTITUTION the table is %q (%v), want InnoDB", engine, err)
	}
}

// TestLockTablesFindingCountsTheApplication: where no digest can name tables (performance_schema
// off, as on many hosted servers, or its statements_digest consumer off), plan's lock-tables
// finding reads the server-wide counter; the LOCK TABLES enginemig sent converting one table
// (verification's chunks, the cut-over) must not make plan warn about the next, and one of the
// application's must. The consumer is turned off rather than performance_schema: MySQL's
// cut-over needs performance_schema's lock tables.
func TestLockTablesFindingCountsTheApplication(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, root := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, root, "UPDATE performance_schema.setup_consumers SET ENABLED = 'NO' WHERE NAME = 'statements_digest'")
	sandboxtest.MustExec(t, root,
		"CREATE TABLE a (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO a (v) SELECT seq FROM "+sandboxtest.Seq(5000),
		"CREATE TABLE b (id INT NOT NULL PRIMARY KEY) ENGINE=MyISAM")
	empty := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root", "--ssl-mode", "DISABLED"}
	lockFindings := func() string {
		out, code := runCLI(t, append(append([]string{"plan"}, conn...), "--database", schema, "--no-test-compile")...)
		if code != outcome.OK {
			t.Fatalf("plan: exit %d\n%s", code, out)
		}
		var found []string
		lines := strings.Split(out, "\n")
		for i, line := range lines {
			if strings.Contains(line, "lock-tables") {
				found = append(found, strings.TrimSpace(line))
				if i+1 < len(lines) && strings.Contains(lines[i+1], "remedy:") {
					found = append(found, strings.TrimSpace(lines[i+1]))
				}
			}
		}
		return strings.Join(found, "\n")
	}
	if f := lockFindings(); f != "" {
		t.Fatalf("a fresh server: %s", f)
	}
	if out, code := runCLI(t, append(append([]string{"apply"}, conn...), "--database", schema, "--table", "a")...); code != outcome.OK {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	var counter int64
	var name string
	if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_lock_tables'").Scan(&name, &counter); err != nil || counter == 0 {
		t.Fatalf("Com_lock_tables after apply: %d (%v): the test proves nothing if apply locked nothing", counter, err)
	}
	if f := lockFindings(); f != "" {
		t.Fatalf("after apply sent %d LOCK TABLES, plan warns: %s", counter, f)
	}
	app, err := srv.Open(schema)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	c, err := app.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(context.Background(), "LOCK TABLES b WRITE"); err != nil {
		t.Fatal(err)
	}
	c.ExecContext(context.Background(), "UNLOCK TABLES")
	c.Close()
	if f := lockFindings(); !strings.Contains(f, "LOCK TABLES ran 1 time(s)") || !strings.Contains(f, "statements_digest") {
		t.Fatalf("the application's one LOCK TABLES: %q", f)
	}
}
