package carry

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// TestFinishReadsAgainAfterAStaleAnswer: information_schema on a Galera node once answered, just
// after the swap's rename, as the tables were before it (TestGalera, about 1 run in 4 with one core
// busy). Here the first listing of the live table is that stale one: the real trigger on it, the
// stand-in not. Finish acts on it (nothing to do), then finds the live table without its trigger
// and with the stand-in, reads again and completes the move.
func TestFinishReadsAgainAfterAStaleAnswer(t *testing.T) {
	ctx := context.Background()
	db, schema, c, logged := swapped(t)
	stale := true
	c.listing = func(ctx context.Context, onTable string) ([]string, error) {
		if onTable == "t" && stale {
			stale = false
			return []string{"t_bi"}, nil // t before the rename
		}
		return table.TriggerNames(ctx, db, schema, onTable)
	}
	if err := c.Finish(ctx); err != nil {
		t.Fatalf("finish after a stale answer: %v", err)
	}
	if !strings.Contains(logged.String(), "reading it again") {
		t.Errorf("finish did not read the live table again:\n%s", logged.String())
	}
	checkCarried(t, db, schema)
}

// TestFinishAsksForADroppedStandIn: on a Galera node information_schema went on listing a
// stand-in on the live table after its DROP succeeded (a second DROP answered 1360). Here it lists
// the stand-in there at every reading; Finish must take the server's own answer for it, and run
// again (as after a crash), count the stand-in's DROP answering 1360 as done.
func TestFinishAsksForADroppedStandIn(t *testing.T) {
	ctx := context.Background()
	db, schema, c, logged := swapped(t)
	tmp := table.TempTriggerName(schema, "t", "t_bi")
	c.listing = func(ctx context.Context, onTable string) ([]string, error) {
		names, err := table.TriggerNames(ctx, db, schema, onTable)
		if onTable == "t" && !slices.Contains(names, tmp) {
			names = append(names, tmp)
		}
		return names, err
	}
	if err := c.Finish(ctx); err != nil {
		t.Fatalf("finish with a dropped stand-in still listed: %v\n%s", err, logged.String())
	}
	// Run again (as after a crash): its DROP of the listed stand-in answers 1360, which is done.
	if err := c.Finish(ctx); err != nil {
		t.Fatalf("finish run again with a dropped stand-in still listed: %v\n%s", err, logged.String())
	}
	checkCarried(t, db, schema)
}

// swapped gives a MyISAM t with a trigger of its own, its stand-in installed on the InnoDB
// _t_new, and the two swapped: what Finish starts from after a cut-over.
func swapped(t *testing.T) (*sql.DB, string, *Carrier, *bytes.Buffer) {
	t.Helper()
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	sandboxtest.MustExec(t, db,
		"CREATE TABLE "+q("t")+" (id INT PRIMARY KEY, tag INT NULL) ENGINE=MyISAM",
		"CREATE TABLE "+q("_t_new")+" (id INT PRIMARY KEY, tag INT NULL) ENGINE=InnoDB",
		"CREATE TRIGGER "+q("t_bi")+" BEFORE INSERT ON "+q("t")+" FOR EACH ROW SET NEW.tag = COALESCE(NEW.tag, 0) + 1")
	ctx := context.Background()
	trs, err := table.LoadTriggers(ctx, db, schema, "t")
	if err != nil || len(trs) != 1 {
		t.Fatalf("triggers of t: %v %v", trs, err)
	}
	logged := &bytes.Buffer{}
	c := &Carrier{DB: db, Schema: schema, Live: "t", Triggers: trs, Log: slog.New(slog.NewTextHandler(logged, nil))}
	if err := c.Install(ctx, "_t_new"); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, db, table.RenameTables(schema, [2]string{"t", "_t_old"}, [2]string{"_t_new", "t"}))
	return db, schema, c, logged
}

// checkCarried: t_bi on t, its stand-in gone, and a write to t firing it exactly once.
func checkCarried(t *testing.T, db *sql.DB, schema string) {
	t.Helper()
	ctx := context.Background()
	tmp := table.TempTriggerName(schema, "t", "t_bi")
	if on, err := table.TriggerNames(ctx, db, schema, "t"); err != nil || !slices.Equal(on, []string{"t_bi"}) {
		t.Errorf("triggers on t: %q (%v), want t_bi only", on, err)
	}
	if there, err := table.TriggerExists(ctx, db, schema, tmp); err != nil || there {
		t.Errorf("stand-in %s still exists (%v)", tmp, err)
	}
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	sandboxtest.MustExec(t, db, "INSERT INTO "+q("t")+" (id) VALUES (1)")
	var tag int
	if err := db.QueryRow("SELECT tag FROM " + q("t") + " WHERE id = 1").Scan(&tag); err != nil || tag != 1 {
		t.Errorf("a write to the live table fired its trigger %d time(s) (%v), want once", tag, err)
	}
}
