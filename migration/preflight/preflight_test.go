package preflight_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/testkit/expect"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/shadow"
)

// Connections is what the account-limits check holds apply to: the shared pool once, and for
// every table converted at once its pipeline plus the connection its advisory lock lives on.
func TestConnectionsCountsEveryTablesOwnSessions(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 8} {
		one := preflight.Connections(workers, 1)
		if got := preflight.Connections(workers, 0); got != one {
			t.Errorf("workers %d: 0 tables needs %d connections, 1 table %d: 0 means one table", workers, got, one)
		}
		if want := preflight.Pool + shadow.Connections(workers) + 1; one != want {
			t.Errorf("workers %d: one table needs %d connections, want the pool, the pipeline and the lock's own (%d)", workers, one, want)
		}
		if got, want := preflight.Connections(workers, 4)-preflight.Pool, 4*(one-preflight.Pool); got != want {
			t.Errorf("workers %d: 4 tables add %d connections to the pool, want 4 times one table's (%d)", workers, got, want)
		}
	}
	if preflight.Connections(8, 1) <= preflight.Connections(2, 1) {
		t.Errorf("8 copy workers need %d connections, no more than 2 workers' %d", preflight.Connections(8, 1), preflight.Connections(2, 1))
	}
}

// A refusal carries the Refused code (the exit code that promises nothing was changed), the
// problem as its message and the remedy apart from it.
func TestRefuseKeepsTheProblemAndTheRemedyApart(t *testing.T) {
	err := preflight.Refuse("drop it first", "%s exists", "`d`.`_t_new`")
	var oe *outcome.Error
	if !errors.As(err, &oe) || oe.Code != outcome.Refused {
		t.Fatalf("got %v (code %d), want a refusal", err, outcome.CodeOf(err))
	}
	if oe.Err.Error() != "`d`.`_t_new` exists" || oe.Remedy != "drop it first" {
		t.Fatalf("message %q, remedy %q", oe.Err, oe.Remedy)
	}
	if err.Error() != "`d`.`_t_new` exists; drop it first" {
		t.Fatalf("the user sees %q", err)
	}
}

// CheckTable refuses every table it cannot convert online, says why and what to do, and leaves
// the table and the leftover it found where they were; a plain MyISAM table passes.
func TestCheckTableRefusesWhatItCannotConvert(t *testing.T) {
	const myisam = "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM"
	cases := []struct {
		name   string
		setup  []string
		what   string
		remedy string // {db} is the test's database
	}{
		{"view", []string{"CREATE TABLE base (id INT PRIMARY KEY) ENGINE=MyISAM", "CREATE VIEW t AS SELECT * FROM base"},
			"`t` is a view, not a table", "only base tables can be converted"},
		{"innodb", []string{"CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB"}, "`t` is already InnoDB", "nothing to do"},
		{"memory", []string{"CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MEMORY"}, "`t` uses engine MEMORY, not MyISAM", "converts MyISAM tables only"},
		{"leftover shadow", []string{myisam, "CREATE TABLE _t_new (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"},
			"`_t_new` exists: a leftover of an earlier or running migration", "inspect and drop it: DROP TABLE `{db}`.`_t_new`"},
		{"kept original", []string{myisam, "CREATE TABLE _t_old (id INT PRIMARY KEY, v INT) ENGINE=MyISAM"},
			"`_t_old` exists: a leftover", "drop it only when you no longer need to roll back"},
		{"sentry", []string{myisam, "CREATE TABLE t_emswap (id INT) ENGINE=MyISAM COMMENT='" + cutover.SentryComment + "'"},
			"`t_emswap` exists: a leftover", "DROP TABLE `{db}`.`t_emswap`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			schema, db := sandboxtest.FreshDatabase(t, srv)
			sandboxtest.MustExec(t, db, c.setup...)
			before := expect.Objects(t, db, schema)
			ti, err := preflight.LoadTable(ctx, db, schema, "t")
			if err != nil {
				t.Fatal(err)
			}
			expect.Refusal(t, preflight.CheckTable(ctx, db, ti), outcome.Refused, c.what, strings.ReplaceAll(c.remedy, "{db}", schema))
			if after := expect.Objects(t, db, schema); after != before {
				t.Errorf("the refusal changed the database: before %s; after %s", before, after)
			}
		})
	}
	t.Run("plain MyISAM", func(t *testing.T) {
		schema, db := sandboxtest.FreshDatabase(t, srv)
		sandboxtest.MustExec(t, db, myisam, "CREATE TABLE _u_new (id INT) ENGINE=InnoDB")
		ti, err := preflight.LoadTable(context.Background(), db, schema, "t")
		if err != nil {
			t.Fatal(err)
		}
		if err := preflight.CheckTable(context.Background(), db, ti); err != nil {
			t.Fatalf("a MyISAM table with no leftovers of its own (another table's do not count): %v", err)
		}
	})
}

// LoadTable's "not found" is a usage error that says which of --database and --table is wrong,
// and looking creates nothing.
func TestLoadTableSaysWhichNameIsWrong(t *testing.T) {
	ctx := context.Background()
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM")
	missing := schema + "_missing"
	_, err := preflight.LoadTable(ctx, db, missing, "t")
	expect.Refusal(t, err, outcome.Usage, "database `"+missing+"` does not exist", "check --database")
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", missing).Scan(&n); err != nil || n != 0 {
		t.Errorf("looking for a missing database created it (%d, %v)", n, err)
	}
	_, err = preflight.LoadTable(ctx, db, schema, "nope")
	expect.Refusal(t, err, outcome.Usage, "table `"+schema+"`.`nope` does not exist", "check --table")
	if got := expect.Objects(t, db, schema); got != "t MyISAM" {
		t.Errorf("after looking for a missing table the database holds %s", got)
	}
	ti, err := preflight.LoadTable(ctx, db, schema, "t")
	if err != nil || ti.Name != "t" || ti.Engine != "MyISAM" || len(ti.Columns) != 2 {
		t.Fatalf("loading a table that is there: %+v, %v", ti, err)
	}
}

// CheckServer hands back the capture asked for where the server allows it (the sandbox has the
// binlog in ROW format with full images, so auto chooses the binlog), and refuses one it does not
// know, naming the choices.
func TestCheckServerChoosesTheCapture(t *testing.T) {
	ctx := context.Background()
	_, db := sandboxtest.FreshDatabase(t, srv)
	for _, c := range []struct {
		want string
		mode shadow.Mode
	}{{"auto", shadow.Binlog}, {"binlog", shadow.Binlog}, {"triggers", shadow.Triggers}} {
		version, mode, why, err := preflight.CheckServer(ctx, db, c.want)
		if err != nil || mode != c.mode || version == "" || why == "" {
			t.Errorf("capture %s: mode %q, version %q, why %q, %v; want %s with the server's version and why", c.want, mode, version, why, err, c.mode)
		}
	}
	_, mode, _, err := preflight.CheckServer(ctx, db, "sideways")
	expect.Refusal(t, err, outcome.Refused, `unknown capture "sideways"`, "use --capture auto, binlog or triggers")
	if mode != "" {
		t.Errorf("a refused capture came with mode %q", mode)
	}
}

// PlanBlockers refuses a table plan finds a blocker in, with plan's check id and remedy; a table
// with only warnings passes, and the warnings are logged.
func TestPlanBlockersRefuseABlockedTable(t *testing.T) {
	ctx := context.Background()
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE pergroup (grp INT NOT NULL, n INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (grp, n)) ENGINE=MyISAM",
		"CREATE TABLE fixed (id INT PRIMARY KEY, v CHAR(10)) ENGINE=MyISAM ROW_FORMAT=FIXED",
		"INSERT INTO fixed SELECT seq, 'x' FROM "+sandboxtest.Seq(50))
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	conns := preflight.Connections(0, 1)

	before := expect.Objects(t, db, schema)
	ti, err := preflight.LoadTable(ctx, db, schema, "pergroup")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := preflight.PlanBlockers(ctx, db, ti, shadow.Binlog, conns, nil, 0, log)
	expect.Refusal(t, err, outcome.Refused, "has 1 blocker(s): [autoinc-not-leading]", "decide how ids should be numbered")
	if got != nil {
		t.Errorf("a refusal came with the server's description")
	}
	if after := expect.Objects(t, db, schema); after != before {
		t.Errorf("the refusal changed the database: before %s; after %s", before, after)
	}

	ti, err = preflight.LoadTable(ctx, db, schema, "fixed")
	if err != nil {
		t.Fatal(err)
	}
	logged.Reset()
	got, est, err := preflight.PlanBlockers(ctx, db, ti, shadow.Binlog, conns, nil, 0, log)
	if err != nil || got == nil || got.Version == "" {
		t.Fatalf("a table with a warning only: server %+v, %v", got, err)
	}
	if est.Rows != 50 {
		t.Errorf("plan's estimate of the table: %d rows, want 50", est.Rows)
	}
	if !strings.Contains(logged.String(), "check=row-format-fixed") {
		t.Errorf("the ROW_FORMAT=FIXED warning was not logged: %s", logged.String())
	}
}
