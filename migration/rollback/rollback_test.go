package rollback_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/expect"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/shadow"
)

// A converted table, its writes since the cut-over made on InnoDB, goes back to MyISAM with every
// one of them, whichever way the conversion captured changes (binlog: replayed from the cut-over's
// position; triggers: the kept original verified against the table and recopied where it
// differs). The InnoDB table is kept as _t_new with the same rows, nothing else is left, the
// record says rolled back, and a second rollback is refused, changing nothing.
func TestRollbackSwapsBackWithTheWritesSinceTheCutover(t *testing.T) {
	for _, capture := range []string{"binlog", "triggers"} {
		t.Run(capture, func(t *testing.T) {
			schema, db, id := convert(t, capture, 50)
			sandboxtest.MustExec(t, db, "USE `"+schema+"`",
				"INSERT INTO t VALUES (51, 51), (52, 52)", "UPDATE t SET v = -1 WHERE id = 1", "DELETE FROM t WHERE id = 2")
			want := contents(t, db, schema, "t")
			res, err := run(db, schema)
			if err != nil {
				t.Fatalf("rollback: %v", err)
			}
			if res.MigrationID != id || res.Table != "t" || res.InnoDBTable != "_t_new" || res.Cutover == nil {
				t.Errorf("result %+v, want migration #%d's table back and the InnoDB table kept as _t_new", res, id)
			}
			if capture == "binlog" && res.CaptureChanges < 3 {
				t.Errorf("replayed %d changes, want at least the 3 statements' rows", res.CaptureChanges)
			}
			if got := contents(t, db, schema, "t"); got != want {
				t.Errorf("the MyISAM table back:\n%s\nwant the InnoDB table's:\n%s", got, want)
			}
			if got := contents(t, db, schema, "_t_new"); got != want {
				t.Errorf("the kept InnoDB table:\n%s\nwant:\n%s", got, want)
			}
			after := snapshot(t, db, schema)
			left := []string{table.OwnTableName(schema, "migrations") + " InnoDB", "_t_new InnoDB", "t MyISAM"}
			slices.Sort(left)
			if want := strings.Join(left, ", ") + ", t rolled-back"; after != want {
				t.Errorf("after the rollback: %s; want %s (no _t_old, no triggers, the record rolled back)", after, want)
			}
			states, err := state.NewStore(db, schema).List(context.Background(), schema, "t")
			if err != nil || len(states) != 1 || states[0].FinishedAt == nil || !strings.HasPrefix(states[0].Error, "rolled back") ||
				!strings.Contains(states[0].Error, "InnoDB table kept as _t_new") {
				t.Errorf("the record: %+v, %v; want it finished, saying rolled back and where the InnoDB table is", states, err)
			}
			_, err = run(db, schema)
			expect.Refusal(t, err, outcome.Refused, "the last conversion of "+schema+".t was already rolled back", "nothing to do")
			if again := snapshot(t, db, schema); again != after {
				t.Errorf("the second rollback changed: %s; now %s", after, again)
			}
		})
	}
}

// A rollback refuses, changing nothing, when what it would swap back is not what the conversion
// left: the kept original gone, a sentry in its place, the name the InnoDB table would be kept
// under taken, or columns changed since the cut-over.
func TestRollbackRefusesWhatItCannotSwapBack(t *testing.T) {
	cases := []struct {
		name         string
		change       []string
		what, remedy string // {db} is the test's database
	}{
		{"kept original gone", []string{"RENAME TABLE _t_old TO kept_aside"},
			"the kept original `{db}`.`_t_old` is gone", "nothing to roll back to"},
		{"a sentry in its place", []string{"RENAME TABLE _t_old TO kept_aside",
			"CREATE TABLE _t_old (id INT) ENGINE=MyISAM COMMENT='" + cutover.SentryComment + "'"},
			"`_t_old` is a cut-over sentry, not the kept original", "drop the sentry (DROP TABLE `{db}`.`_t_old`) only if no enginemig runs"},
		{"name taken", []string{"CREATE TABLE _t_new (id INT) ENGINE=InnoDB"},
			"`{db}`.`_t_new` exists; rollback moves the InnoDB table to that name", "drop or rename it first"},
		{"columns changed", []string{"ALTER TABLE t ADD COLUMN extra INT"},
			"`{db}`.`t` and `{db}`.`_t_old` have different columns", "roll back by hand"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema, db, _ := convert(t, "", 20)
			sandboxtest.MustExec(t, db, append([]string{"USE `" + schema + "`"}, c.change...)...)
			before, rows := snapshot(t, db, schema), contents(t, db, schema, "t")
			_, err := run(db, schema)
			expect.Refusal(t, err, outcome.Refused, strings.ReplaceAll(c.what, "{db}", schema), strings.ReplaceAll(c.remedy, "{db}", schema))
			if after := snapshot(t, db, schema); after != before {
				t.Errorf("the refusal changed the database: before %s; after %s", before, after)
			}
			if got := contents(t, db, schema, "t"); got != rows {
				t.Errorf("the table's rows changed: %s; now %s", rows, got)
			}
		})
	}
}

// Rollback starts from the newest completed conversion enginemig recorded of the table, and
// refuses, changing nothing, where there is none: no state table, records of other tables only,
// a dry run, a failed run, a conversion with no cut-over position to capture from, one already
// rolled back. A table recorded as converted that is not InnoDB any more is refused too. The
// tables are laid out as a conversion leaves them, so only the record is missing.
func TestRollbackRefusesWithoutACompletedConversion(t *testing.T) {
	const noConversion, remedy = "no completed conversion of {db}.t is recorded", "rollback applies to tables converted by enginemig apply"
	cases := []struct {
		name         string
		engine       string
		records      []rec // oldest first
		what, remedy string
	}{
		{"no state table", "InnoDB", nil, "no migration state: ", "rollback needs the state table written by apply (see --state-schema)"},
		{"another table's", "InnoDB", []rec{{"u", state.StageDone, true}}, noConversion, remedy},
		{"dry run and failed", "InnoDB", []rec{{"t", state.StageDryRun, false}, {"t", state.StageFailed, true}}, noConversion, remedy},
		{"no cut-over position", "InnoDB", []rec{{"t", state.StageDone, false}}, noConversion, remedy},
		{"rolled back", "InnoDB", []rec{{"t", state.StageDone, true}, {"t", state.StageRolledBack, true}},
			"the last conversion of {db}.t was already rolled back", "nothing to do"},
		{"not InnoDB", "MyISAM", []rec{{"t", state.StageDone, true}}, "`{db}`.`t` is MyISAM, not the converted InnoDB table", "nothing to roll back"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			schema, sdb := sandboxtest.FreshDatabase(t, srv)
			sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE="+c.engine, "INSERT INTO t VALUES (1, 1), (2, 2)",
				"CREATE TABLE _t_old (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO _t_old VALUES (1, 1)")
			db := control(t)
			if len(c.records) > 0 {
				store := state.NewStore(db, schema)
				if err := store.Ensure(ctx); err != nil {
					t.Fatal(err)
				}
				for _, r := range c.records {
					r.write(t, db, store, schema)
				}
			}
			before := snapshot(t, db, schema)
			_, err := run(db, schema)
			expect.Refusal(t, err, outcome.Refused, strings.ReplaceAll(c.what, "{db}", schema), c.remedy)
			if after := snapshot(t, db, schema); after != before {
				t.Errorf("the refusal changed the database: before %s; after %s", before, after)
			}
		})
	}
}

// rec is a migration record a test writes: of which table, at which stage, and whether it holds
// the cut-over's position a rollback captures from.
type rec struct {
	table      string
	stage      state.Stage
	positioned bool
}

func (r rec) write(t *testing.T, db *sql.DB, store *state.Store, schema string) {
	t.Helper()
	ctx := context.Background()
	st := &state.State{Schema: schema, Table: r.table, Stage: r.stage, Capture: shadow.Binlog}
	if err := store.Begin(ctx, st); err != nil {
		t.Fatal(err)
	}
	if r.positioned {
		pos, err := shadow.Now(ctx, db, shadow.Binlog)
		if err != nil || pos == "" {
			t.Fatalf("the server's binlog position: %q, %v", pos, err)
		}
		st.CaptureCutover = pos
	}
	now := time.Now().UTC()
	st.FinishedAt = &now
	if err := store.Save(ctx, st); err != nil {
		t.Fatal(err)
	}
}
