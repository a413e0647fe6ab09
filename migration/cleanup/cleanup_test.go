package cleanup_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/expect"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/cleanup"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/shadow"
)

// A cut-over interrupted between its steps leaves a sentry, a gate and the shadow beside the
// table: cleanup drops those three, in that order, and keeps the original it cannot tell is no
// longer wanted; the table itself is untouched.
func TestCleanupDropsLeftoversAndKeepsTheOriginal(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(20),
		"CREATE TABLE _t_new (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
		"CREATE TABLE _t_old (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"CREATE TABLE t_emswap (id INT) ENGINE=MyISAM COMMENT='"+cutover.SentryComment+"'",
		"CREATE TABLE `#t_gate` (id INT) ENGINE=InnoDB COMMENT='"+cutover.GateComment+"'")
	res, err := cleanup.Run(context.Background(), db, cleanup.Options{Conn: conn(), Schema: schema, Table: "t", StateSchema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"t_emswap", "#t_gate", "_t_new"}; !slices.Equal(res.Dropped, want) {
		t.Errorf("dropped %q, want %q", res.Dropped, want)
	}
	if len(res.Kept) != 1 || !strings.HasPrefix(res.Kept[0], "_t_old ") || !strings.Contains(res.Kept[0], "--drop-old") {
		t.Errorf("kept %q, want _t_old and how to drop it", res.Kept)
	}
	if got := expect.Objects(t, db, schema); got != "_t_old MyISAM, t MyISAM" {
		t.Errorf("left %s, want the table and its kept original", got)
	}
	if n := count(t, db, schema, "t"); n != 20 {
		t.Errorf("the table has %d rows after cleanup, want its 20", n)
	}
}

// With DropOld the kept original goes too: after a finished conversion that ends the possibility
// of a rollback, and nothing is left but the converted table.
func TestCleanupDropOldDropsTheKeptOriginal(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
		"CREATE TABLE _t_old (id INT PRIMARY KEY, v INT) ENGINE=MyISAM")
	res, err := cleanup.Run(context.Background(), db, cleanup.Options{Conn: conn(), Schema: schema, Table: "t", StateSchema: schema, DropOld: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Dropped, []string{"_t_old"}) || len(res.Kept) != 0 {
		t.Errorf("dropped %q, kept %q; want _t_old dropped and nothing kept", res.Dropped, res.Kept)
	}
	if got := expect.Objects(t, db, schema); got != "t InnoDB" {
		t.Errorf("left %s, want only the converted table", got)
	}
}

// An apply that died in its copy left trigger capture on the table, its change log, the shadow
// and a record saying "copy". Cleanup removes the capture first (a trigger whose change log is
// gone would fail every application write), then the shadow, and records the run as interrupted;
// the records of finished runs and of other tables stay as they were.
func TestCleanupAfterADeadCopy(t *testing.T) {
	ctx := context.Background()
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(20),
		"CREATE TABLE _t_new (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
		"INSERT INTO _t_new SELECT * FROM t WHERE id <= 10")
	ti, err := table.Load(ctx, db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := shadow.Install(ctx, shadow.Config{DB: db, Source: ti, Target: "_t_new", Mode: shadow.Triggers, ChangeLog: table.ChangeLogName("t", false)}); err != nil {
		t.Fatal(err)
	}
	capture := expect.Objects(t, db, schema)
	if !strings.Contains(capture, "trigger ") || !strings.Contains(capture, table.ChangeLogName("t", false)) {
		t.Fatalf("no capture to clean up: %s", capture)
	}
	store := state.NewStore(db, schema)
	if err := store.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	done := record(t, store, schema, "t", state.StageDone, true)
	dead := record(t, store, schema, "t", state.StageCopy, false)
	other := record(t, store, schema, "u", state.StageCopy, false)

	res, err := cleanup.Run(ctx, db, cleanup.Options{Conn: conn(), Schema: schema, Table: "t", StateSchema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) < 2 || res.Dropped[len(res.Dropped)-1] != "_t_new" || !slices.Contains(res.Dropped, table.ChangeLogName("t", false)) {
		t.Errorf("dropped %q, want the capture's triggers and change log, then _t_new", res.Dropped)
	}
	if got, want := expect.Objects(t, db, schema), table.OwnTableName(schema, "migrations")+" InnoDB, t MyISAM"; got != want {
		t.Errorf("left %s, want %s", got, want)
	}
	sandboxtest.MustExec(t, db, "INSERT INTO t VALUES (21, 21)") // the application writes again

	stages := map[int64]state.State{}
	for _, tbl := range []string{"t", "u"} {
		states, err := store.List(ctx, schema, tbl)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range states {
			stages[st.ID] = st
		}
	}
	if st := stages[dead]; st.Stage != state.StageFailed || st.FinishedAt == nil || st.Error != "interrupted; cleaned up" {
		t.Errorf("the dead run's record: stage %s, finished %v, error %q; want failed, finished, interrupted", st.Stage, st.FinishedAt, st.Error)
	}
	if st := stages[done]; st.Stage != state.StageDone || st.Error != "" {
		t.Errorf("a finished run's record became %s %q", st.Stage, st.Error)
	}
	if st := stages[other]; st.Stage != state.StageCopy || st.FinishedAt != nil {
		t.Errorf("another table's record became %s (finished %v)", st.Stage, st.FinishedAt)
	}
}

// record writes a migration record of schema.tbl at stage, finished or not, and returns its id.
func record(t *testing.T, store *state.Store, schema, tbl string, stage state.Stage, finished bool) int64 {
	t.Helper()
	st := &state.State{Schema: schema, Table: tbl, Stage: stage, Capture: shadow.Triggers}
	if err := store.Begin(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if finished {
		now := time.Now().UTC()
		st.FinishedAt = &now
		if err := store.Save(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	return st.ID
}

// Cleanup refuses, dropping nothing, when the table is not there (a usage error naming what is
// wrong), when another enginemig holds the table, and when the swap's name holds a table that is
// not enginemig's sentry: the original renamed there by a cut-over interrupted right after the
// swap, which only a person can put back.
func TestCleanupRefusals(t *testing.T) {
	ctx := context.Background()
	leftovers := []string{"CREATE TABLE _t_new (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO _t_new VALUES (1, 1)"}
	cases := []struct {
		name         string
		setup        []string
		lock         bool // another enginemig holds the table
		elsewhere    bool // cleanup is pointed at a database that does not exist
		table        string
		code         outcome.Code
		what, remedy string
	}{
		{name: "missing table", table: "t", code: outcome.Usage, what: "`.`t` does not exist", remedy: "check --table"},
		{name: "missing database", elsewhere: true, table: "t", code: outcome.Usage, what: "_gone` does not exist", remedy: "check --database"},
		{name: "running", setup: []string{"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM"}, lock: true, table: "t",
			code: outcome.Refused, what: "another enginemig is migrating", remedy: "wait for it to finish"},
		{name: "swap holds data", setup: []string{"CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
			"CREATE TABLE t_emswap (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t_emswap VALUES (1, 1)"}, table: "t",
			code: outcome.Refused, what: "`t_emswap` is not an enginemig sentry", remedy: "rename it to _t_old by hand"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema, db := sandboxtest.FreshDatabase(t, srv)
			sandboxtest.MustExec(t, db, append(leftovers, c.setup...)...)
			target := schema
			if c.elsewhere {
				target = schema + "_gone"
			}
			if c.lock {
				held, err := state.Lock(ctx, conn(), schema, c.table)
				if err != nil {
					t.Fatal(err)
				}
				defer held.Close()
			}
			before := expect.Objects(t, db, schema)
			res, err := cleanup.Run(ctx, db, cleanup.Options{Conn: conn(), Schema: target, Table: c.table, StateSchema: schema})
			expect.Refusal(t, err, c.code, c.what, c.remedy)
			if res != nil && len(res.Dropped) > 0 {
				t.Errorf("a refused cleanup reports %q dropped", res.Dropped)
			}
			if after := expect.Objects(t, db, schema); after != before {
				t.Errorf("the refusal changed the database: before %s; after %s", before, after)
			}
			if n := count(t, db, schema, "_t_new"); n != 1 {
				t.Errorf("the shadow has %d rows after the refusal, want its 1", n)
			}
		})
	}
}
