package migration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/rollback"
)

// hostedServer starts a server as hosts run them: performance_schema off (MariaDB's default, and
// most hosts'), the binlog as given ("OFF": none, shared hosting's usual setting).
func hostedServer(t *testing.T, binlog string) *sandbox.Server {
	return sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: binlog, ExtraArgs: []string{"--performance-schema=OFF"}})
}

// hostedLimit is the host's statement limit, scaled to the tests' tables (10,000 rows here; a
// shared host's 30 s meets a 30M-row table the same way): below the index build's time.
const hostedLimit = "0.02"

// hostedAccount is what a shared host gives: ALL on one database and nothing global, every
// statement capped (MariaDB: per account, as hosts grant it; MySQL: max_execution_time, its
// SELECTs only, set globally), and a connection cap. global adds privileges on *.* (a managed
// server's admin account: the replication privileges, never SUPER).
func hostedAccount(t *testing.T, srv *sandbox.Server, schema, user string, global ...string) dbconn.Config {
	t.Helper()
	root, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	account := "'" + user + "'@'%'"
	sandboxtest.MustExec(t, root, "CREATE USER "+account+" IDENTIFIED BY 'pw'",
		"GRANT ALL PRIVILEGES ON "+dbconn.QuoteIdent(schema)+".* TO "+account)
	if srv.Flavour().MySQL() {
		sandboxtest.MustExec(t, root, "SET GLOBAL max_execution_time = 20", "ALTER USER "+account+" WITH MAX_USER_CONNECTIONS 40")
	} else {
		sandboxtest.MustExec(t, root, "GRANT USAGE ON *.* TO "+account+" WITH MAX_USER_CONNECTIONS 40 MAX_STATEMENT_TIME "+hostedLimit)
	}
	for _, g := range global {
		if !strings.Contains(g, " ON ") {
			g += " ON *.*"
		}
		sandboxtest.MustExec(t, root, "GRANT "+g+" TO "+account)
	}
	return dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: user, Password: "pw", SSLMode: dbconn.SSLDisabled}
}

// On hosted and managed servers the defaults convert wherever the account can, and refuse up
// front where it cannot: a database-only account under a statement limit, with performance_schema
// off, converts a table with two secondary keys under writers by trigger capture without a binlog
// (and rolls back), and with one where the server trusts routine creators; an account the host
// gave the replication privileges (a managed server's) converts by binlog capture (and rolls back); where neither
// capture can work, apply refuses before it creates anything, naming each route. The state goes
// into the account's database (it may not create enginemig's own). With the session limits left
// in place (dbconn's liftLimits off) the first staged chunk is killed (1969). On the sandbox's MySQL
// every case is refused before anything is created (see the test's body).
func TestHostedAccountsConvertWithTheDefaults(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	for _, c := range []struct {
		name, binlog string
		trust        bool     // log_bin_trust_function_creators
		global       []string // the account's global privileges
		refused      string   // "": converts
		rollback     bool     // and rolls back (once per capture: the rollbacks are the test's longest part)
	}{
		{name: "shared host, no binlog", binlog: "OFF", rollback: true},
		{name: "shared host, binlog", binlog: "ROW", refused: "log_bin_trust_function_creators"},
		{name: "shared host, binlog, creators trusted", binlog: "ROW", trust: true},
		{name: "managed server", binlog: "ROW", global: []string{"REPLICATION SLAVE, REPLICATION CLIENT"}, rollback: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := hostedServer(t, c.binlog)
			if srv.Flavour().MySQL() {
				// The sandbox's MySQL enforces GTID consistency (no trigger capture), and its
				// cut-over needs performance_schema.metadata_locks, which the hosted profile has
				// off: every route is refused there, up front.
				c.refused = "performance_schema"
				if len(c.global) == 0 {
					c.refused = "enforce_gtid_consistency"
				}
			}
			schema, root := sandboxtest.FreshDatabase(t, srv)
			if c.trust {
				sandboxtest.MustExec(t, root, "SET GLOBAL log_bin_trust_function_creators = 1")
			}
			conn := hostedAccount(t, srv, schema, "site", c.global...)
			db, err := dbconn.Open(context.Background(), conn, "", 8)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ws := seedAllTypes(t, root, schema, 10000, 3, 59)
			stop := runWriters(ws, appPause)
			defer stop()
			opts := testOptions(srv, schema, "t")
			opts.Conn, opts.StateSchema = conn, "" // the product's default: --state-schema _enginemig
			ctx := context.Background()
			_, err = Run(ctx, db, opts)
			if c.refused != "" {
				if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("apply returned %v (code %d); want a refusal naming %q", err, outcome.CodeOf(err), c.refused)
				}
				if len(c.global) == 0 && !strings.Contains(err.Error(), "GRANT REPLICATION SLAVE") && !strings.Contains(err.Error(), "binlog in ROW format") {
					t.Fatalf("the refusal does not name binlog capture's route: %v", err)
				}
				t.Logf("refused: %v", err)
				var triggers int
				root.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", schema).Scan(&triggers)
				if tableExists(t, root, schema, "_t_new") || triggers > 0 || engineOf(t, root, schema, "t") != "MyISAM" {
					t.Fatalf("the refusal changed something: shadow %v, %d triggers", tableExists(t, root, schema, "_t_new"), triggers)
				}
				return
			}
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			// The binlog stream's replication session is not among the pools dbconn counts.
			stream := map[bool]int64{true: 1}[len(c.global) > 0]
			if use := conn.OwnUse(); use.Peak+stream > int64(preflight.Connections(DefaultCopyWorkers, 1)) {
				t.Fatalf("apply held %d connections at once; it budgets %d (plan's account-limits check)", use.Peak+stream, preflight.Connections(DefaultCopyWorkers, 1))
			}
			want, changes := "InnoDB", int64(0)
			if c.rollback {
				time.Sleep(time.Second) // writes that only the InnoDB table receives
				rb, err := rollback.Run(ctx, db, rollback.Options{Conn: conn, Schema: schema, Table: "t", Logger: opts.Logger})
				if err != nil {
					stop()
					t.Fatalf("rollback: %v", err)
				}
				want, changes = "MyISAM", rb.CaptureChanges
			}
			time.Sleep(300 * time.Millisecond)
			stop()
			for _, w := range ws {
				if len(w.failures) > 0 {
					t.Errorf("writer %d: %v", w.id, w.failures[0])
				}
			}
			if engineOf(t, root, schema, "t") != want {
				t.Fatalf("t is %s, want %s", engineOf(t, root, schema, "t"), want)
			}
			if diff := sameRows(t, root, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
				t.Fatalf("the table differs from the reference: %s", diff)
			}
			if !tableExists(t, root, schema, "_enginemig_migrations") {
				t.Fatal("the state is not in the account's database")
			}
			t.Logf("%s (%d changes since the cut-over carried back)", want, changes)
		})
	}
}

// A hosted account's run that dies during the copy is resumed by the next apply with the
// defaults: its state is in the account's database, trigger capture kept noting the writes made
// while nothing ran, and the resumed run copies only what was left.
func TestHostedAccountResumes(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	var srv *sandbox.Server
	var global []string
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		// MySQL's enforced GTID consistency leaves binlog capture: a managed server's account,
		// whose cut-over reads performance_schema.
		srv, global = sandboxtest.ForTest(t, sandbox.Options{}), []string{"REPLICATION SLAVE, REPLICATION CLIENT", "SELECT ON performance_schema.*"}
	} else {
		srv = hostedServer(t, "OFF")
	}
	schema, root := sandboxtest.FreshDatabase(t, srv)
	conn := hostedAccount(t, srv, schema, "site", global...)
	db, err := dbconn.Open(context.Background(), conn, "", preflight.Pool)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ws := seedAllTypes(t, root, schema, resumeRows, 3, 61)
	stop := runWriters(ws, appPause)
	defer stop()
	logs := &logLines{}
	opts := testOptions(srv, schema, "t")
	opts.Conn, opts.StateSchema, opts.Logger = conn, "", logs.logger()
	hooks := faults.Hooks{CopyChunkTime: 2 * time.Millisecond, SaveEvery: 50 * time.Millisecond}
	hooks.CrashAfterRows = resumeRows / 2
	if _, err := Run(withHooks(context.Background(), hooks), db, opts); !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("first run: want the simulated crash, got %v", err)
	}
	time.Sleep(time.Second) // writes while nothing runs: the triggers note them
	hooks.CrashAfterRows = 0
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	time.Sleep(200 * time.Millisecond)
	stop()
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), "resuming migration") || res.RowsCopied >= resumeRows {
		t.Fatalf("the second run did not resume the copy (copied %d rows)\n%s", res.RowsCopied, logs)
	}
	checkWriters(t, ws)
	if engineOf(t, root, schema, "t") != "InnoDB" {
		t.Fatal("not converted")
	}
	if srv.Flavour().MySQL() {
		// The host's limit is global there (hostedAccount): the test's own full comparison, in
		// sessions opened after, must outlast it.
		sandboxtest.MustExec(t, root, "SET GLOBAL max_execution_time = 0")
		fresh, err := srv.Open("")
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		root = fresh
	}
	if diff := sameRows(t, root, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
		t.Fatalf("the table differs from the reference: %s", diff)
	}
}
