package migration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/plan"
	"golang.org/x/sync/errgroup"
)

// limitedAccount is a database-only account with the given resource limits (GRANT ... WITH, as
// hosts set them; MySQL: ALTER USER).
func limitedAccount(t *testing.T, root *sql.DB, srv *sandbox.Server, schema, user, limits string) dbconn.Config {
	t.Helper()
	account := "'" + user + "'@'%'"
	sandboxtest.MustExec(t, root, "CREATE USER "+account+" IDENTIFIED BY 'pw'",
		"GRANT ALL PRIVILEGES ON "+dbconn.QuoteIdent(schema)+".* TO "+account)
	if srv.Flavour().MySQL() {
		// A managed server's account: MySQL's enforced GTID consistency leaves binlog capture,
		// and its cut-over reads performance_schema.
		sandboxtest.MustExec(t, root, "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO "+account,
			"GRANT SELECT ON performance_schema.* TO "+account)
	}
	if srv.Flavour().MySQL() {
		sandboxtest.MustExec(t, root, "ALTER USER "+account+" WITH "+limits)
	} else {
		sandboxtest.MustExec(t, root, "GRANT USAGE ON *.* TO "+account+" WITH "+limits)
	}
	return dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: user, Password: "pw", SSLMode: dbconn.SSLDisabled}
}

// holdConnections opens n connections on the account and keeps them open, as an application
// sharing it does.
func holdConnections(t *testing.T, c dbconn.Config, n int) {
	t.Helper()
	app, err := dbconn.OpenApplication(context.Background(), c, "", n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	for range n {
		conn, err := app.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
	}
}

// An account's limits that no session lifts are read and kept: with MAX_USER_CONNECTIONS too small
// for apply beside the application's open connections, apply refuses before it creates anything,
// saying how many it needs; with room, it converts and never holds more than it budgets
// (preflight.Connections: plan's account-limits check holds the account's cap against it). With an
// hourly statement limit, apply holds the copy back once it has sent half of it (throttle reason
// account-hourly), so the application's statements are never refused (error 1226).
func TestAccountLimitsKeepApplyWithin(t *testing.T) {
	var srv *sandbox.Server
	if f, _ := sandboxtest.Flavour(); f.MySQL() {
		srv = sandboxtest.ForTest(t, sandbox.Options{}) // see limitedAccount
	} else {
		srv = hostedServer(t, "OFF")
	}
	const app = 3 // the application's connections on the account
	need := preflight.Connections(DefaultCopyWorkers, 1)
	run := func(t *testing.T, user, limits string, rows int) (conn dbconn.Config, root *sql.DB, schema string, ws []*writer) {
		schema, root = sandboxtest.FreshDatabase(t, srv)
		conn = limitedAccount(t, root, srv, schema, user, limits)
		holdConnections(t, conn, app)
		return conn, root, schema, seedAllTypes(t, root, schema, rows, 3, 59)
	}
	open := func(t *testing.T, conn dbconn.Config) *sql.DB {
		db, err := dbconn.Open(context.Background(), conn, "", preflight.Pool)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	t.Run("connection cap too small", func(t *testing.T) {
		conn, root, schema, _ := run(t, "tight", fmt.Sprintf("MAX_USER_CONNECTIONS %d", need+app-1), 1000)
		opts := testOptions(srv, schema, "t")
		opts.Conn, opts.StateSchema = conn, ""
		_, err := Run(context.Background(), open(t, conn), opts)
		if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), fmt.Sprintf("up to %d connections", need)) {
			t.Fatalf("apply returned %v (code %d); want a refusal saying it needs %d connections", err, outcome.CodeOf(err), need)
		}
		t.Logf("refused: %v", err)
		if tableExists(t, root, schema, "_t_new") || engineOf(t, root, schema, "t") != "MyISAM" {
			t.Fatal("the refusal changed something")
		}
	})
	t.Run("connection cap with room", func(t *testing.T) {
		conn, root, schema, ws := run(t, "roomy", fmt.Sprintf("MAX_USER_CONNECTIONS %d", need+app), 10000)
		stop := runWriters(ws, appPause)
		defer stop()
		opts := testOptions(srv, schema, "t")
		opts.Conn, opts.StateSchema = conn, ""
		if _, err := Run(context.Background(), open(t, conn), opts); err != nil {
			t.Fatalf("apply: %v", err)
		}
		stop()
		checkWriters(t, ws)
		if diff := sameRows(t, root, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
			t.Fatalf("the table differs from the reference: %s", diff)
		}
		// The binlog stream's replication session is not among the pools dbconn counts.
		stream := map[bool]int64{true: 1}[srv.Flavour().MySQL()]
		if use := conn.OwnUse(); use.Peak+stream > int64(need) {
			t.Fatalf("apply held %d connections at once; it budgets %d", use.Peak+stream, need)
		} else {
			t.Logf("apply held at most %d connections at once (budget %d), opened %d, sent %d statements", use.Peak, need, use.Connects, use.Statements)
		}
	})
	t.Run("hourly statement limit", func(t *testing.T) {
		// The smallest limit plan lets through (below it apply's watchers alone would spend the
		// share), nearly spent before apply starts, as an earlier table of a whole-plan run
		// would leave it: apply holds back almost at once.
		limit := 2 * plan.WatchPerHour
		conn, root, schema, ws := run(t, "hourly", fmt.Sprintf("MAX_QUERIES_PER_HOUR %d", limit), 10000)
		spend(t, conn, limit/2-100)
		stop := runWriters(ws, appPause)
		defer stop()
		opts := testOptions(srv, schema, "t")
		opts.Conn, opts.StateSchema = conn, ""
		held := make(chan struct{})
		logs := &logLines{each: func(line string) {
			if (strings.Contains(line, `msg="copy throttled"`) && strings.Contains(line, "of the account's hourly limit")) ||
				strings.Contains(line, "waiting for the account's hourly budget") {
				select {
				case <-held:
				default:
					close(held)
				}
			}
		}}
		opts.Logger = logs.logger()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { _, err := Run(ctx, open(t, conn), opts); done <- err }()
		select {
		case <-held:
		case err := <-done:
			t.Fatalf("apply ended (%v) without holding back for the account's hourly limit, after %d statements; its log:\n%s", err, conn.OwnUse().Statements, logs)
		case <-time.After(3 * time.Minute):
			t.Fatal("apply neither held back nor ended in 3 minutes")
		}
		// Held: what was under way when the budget ran out ends (a chunk, a stage's statements:
		// twice a burst in the first seconds made 11 statements a second, on a loaded machine),
		// then only the watchers go on, and they are measured.
		time.Sleep(2 * time.Second)
		before, start := conn.OwnUse().Statements, time.Now()
		time.Sleep(4 * time.Second)
		watched := float64(conn.OwnUse().Statements-before) / time.Since(start).Seconds()
		cancel()
		err := <-done
		stop()
		checkWriters(t, ws)
		if err == nil || strings.Contains(logs.String(), "Error 1226") {
			t.Fatalf("apply returned %v; its log: %s", err, logs.String())
		}
		if used := conn.OwnUse().Statements; used >= int64(limit) {
			t.Fatalf("apply sent %d statements; the account's limit is %d an hour", used, limit)
		}
		// The watchers are timed, not paced by the machine: plan's estimate holds anywhere. Binlog
		// replay (MySQL here) is not held: it follows the application's writes in larger batches.
		if perHour := watched * 3600; !srv.Flavour().MySQL() && perHour > 1.5*plan.WatchPerHour {
			t.Fatalf("while held apply sent %.0f statements an hour; plan budgets its watchers %d; its log:\n%s", perHour, plan.WatchPerHour, logs)
		}
		t.Logf("held back at its share; while held %.1f statements a second (plan budgets %d an hour); stopped: %v", watched, plan.WatchPerHour, err)
		if engineOf(t, root, schema, "t") != "MyISAM" {
			t.Fatal("the table is no longer MyISAM after the stopped run")
		}
		if diff := sameRows(t, root, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
			t.Fatalf("the table differs from the reference: %s", diff)
		}
	})
}

// spend sends n statements on the account through this process's own connections, counted as
// enginemig's (dbconn.OwnUse).
func spend(t *testing.T, c dbconn.Config, n int) {
	t.Helper()
	db, err := dbconn.Open(context.Background(), c, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			for i := w; i < n; i += 4 {
				if _, err := db.Exec("DO 1"); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}
