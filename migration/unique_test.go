package migration

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/migration/state"
)

// uniqueColumns are allTypesColumns and uq, the column with a unique secondary index.
var uniqueColumns = append(allTypesColumns[:len(allTypesColumns):len(allTypesColumns)], "uq")

// seedUnique is seedAllTypes with a NULLable unique column uq (UNIQUE KEY uq) on both tables: a
// row's uq starts as its id, every seventh is NULL, and the writers move the values between their
// own rows (moveUnique), so no two writers ever compete for one value and both tables take the
// same statements alike.
func seedUnique(t *testing.T, db *sql.DB, schema string, rows, writers int, seed uint64) []*writer {
	t.Helper()
	ws := seedAllTypes(t, db, schema, rows, writers, seed)
	for _, tbl := range []string{"t", "ref"} {
		q := dbconn.QualifiedName(schema, tbl)
		sandboxtest.MustExec(t, db, "ALTER TABLE "+q+" ADD uq BIGINT NULL, ADD UNIQUE KEY uq (uq)",
			"UPDATE "+q+" SET uq = id WHERE id % 7 <> 0")
	}
	for i, w := range ws {
		w.moves, w.fresh = true, int64(i+1)*1_000_000_000
	}
	return ws
}

// moveUnique moves uq values between two of the writer's rows a and b, read from ref (which only
// this writer writes for its rows): a swap through NULL (three statements, as MyISAM checks each
// row at once), a move from a to b with a fresh value for a, or a's value handed to a new row
// after a is deleted. Every statement runs on t, then on ref.
func (w *writer) moveUnique(ctx context.Context) {
	i, j := w.r.IntN(len(w.ids)), w.r.IntN(len(w.ids)-1)
	if j >= i {
		j++
	}
	a, b := w.ids[i], w.ids[j]
	var va, vb sql.NullInt64
	ref := dbconn.QualifiedName(w.schema, "ref")
	if err := w.db.QueryRow("SELECT uq FROM "+ref+" WHERE id = ?", a).Scan(&va); err != nil {
		w.failures = append(w.failures, "read uq: "+err.Error())
		return
	}
	if err := w.db.QueryRow("SELECT uq FROM "+ref+" WHERE id = ?", b).Scan(&vb); err != nil {
		w.failures = append(w.failures, "read uq: "+err.Error())
		return
	}
	switch w.r.IntN(3) {
	case 0: // swap
		_ = w.exec(ctx, "UPDATE {T} SET uq = NULL WHERE id = ?", a) &&
			w.exec(ctx, "UPDATE {T} SET uq = ?, k = k + 1 WHERE id = ?", va, b) &&
			w.exec(ctx, "UPDATE {T} SET uq = ? WHERE id = ?", vb, a)
	case 1: // move a's value to b
		w.fresh++
		_ = w.exec(ctx, "UPDATE {T} SET uq = ? WHERE id = ?", w.fresh, a) &&
			w.exec(ctx, "UPDATE {T} SET uq = ?, f = ? WHERE id = ?", va, w.r.Float32(), b)
	default: // a's value to a new row
		if !w.exec(ctx, "DELETE FROM {T} WHERE id = ?", a) {
			return
		}
		w.ids = append(w.ids[:i], w.ids[i+1:]...)
		w.next++
		if w.exec(ctx, "INSERT INTO {T} (id, uq, "+rowCols+") VALUES (?, ?, "+rowPlaceholders+")", append([]any{w.next, va}, randomRow(w.r)...)...) {
			w.ids = append(w.ids, w.next)
		}
	}
}

// TestUniqueIndexUpFrontUnderWriters is the claim behind converting a table with a unique
// secondary index on a Galera node, where the shadow has every index from the start: under writers
// that keep moving unique values between rows, a REPLACE that removes another row holding a stale
// value never loses it (shadow/order.go, "unique secondary indexes"). Run on a plain server with
// the shadow forced to get every index up front, serial and with parallel chunks overtaking each
// other, with replay kept a little behind so that chunks read ahead of it; verification must
// repair nothing and the table must equal the reference.
func TestUniqueIndexUpFrontUnderWriters(t *testing.T) {
	for _, v := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		t.Run(v.name, func(t *testing.T) {
			seed := func(t *testing.T, db *sql.DB, schema string) []*writer {
				return seedUnique(t, db, schema, 5000, 4, 17)
			}
			var shadow string
			concurrentWritersOn(t, srv, seed, uniqueColumns, 0, func(o *Options, h *faults.Hooks) {
				h.AllIndexesUpFront = true
				o.Hook = func(ctx context.Context, at Point, st *state.State) error {
					if at == Before(state.StageCopy) {
						return openControl(t, srv).QueryRowContext(ctx, "SHOW CREATE TABLE "+dbconn.QualifiedName(st.Schema, "_t_new")).Scan(new(string), &shadow)
					}
					return nil
				}
				h.ReplayDelay = 5 * time.Millisecond
				if v.parallel {
					o.CopyWorkers, h.CopyAlwaysParallel, h.OvertakeDelay = 2, true, 30*time.Millisecond
				}
			})
			if !strings.Contains(shadow, "UNIQUE KEY `uq`") {
				t.Fatalf("the shadow had no unique index during the copy:\n%s", shadow)
			}
		})
	}
}

// TestUniqueIndexUpFrontResumed: a run with every index in the shadow dies halfway through the
// copy under the same writers; the resumed run replays from its saved position, changes older
// than rows the shadow already holds, with the unique index in place (a Galera node builds no
// index after the copy, so it drops none for a resume either). Verification must repair nothing
// and the table must equal the reference.
func TestUniqueIndexUpFrontResumed(t *testing.T) {
	const rows = 5000
	schema, _ := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	ws := seedUnique(t, db, schema, rows, 3, 29)
	stop := runWriters(ws, appPause)
	defer stop()
	opts := testOptions(srv, schema, "t")
	hooks := faults.Hooks{CopyChunkTime: 2 * time.Millisecond} // many small copy chunks under the writers; verification at apply's chunk time
	opts.ProgressEvery, hooks.SaveEvery = 50*time.Millisecond, 50*time.Millisecond
	hooks.AllIndexesUpFront = true
	hooks.CrashAfterRows = rows / 2
	if _, err := Run(withHooks(context.Background(), hooks), db, opts); !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("first run: want simulated crash, got %v", err)
	}
	time.Sleep(time.Second) // writes while nothing runs: only the binlog keeps them
	hooks.CrashAfterRows = 0
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	time.Sleep(200 * time.Millisecond)
	stop()
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	checkWriters(t, ws)
	t.Logf("resumed: copied %d rows on the second run, replayed %d changes, verify %+v", res.RowsCopied, res.CaptureChanges, res.Verify)
	if res.RowsCopied >= rows || res.DeferredIndex != 0 {
		t.Fatalf("the second run did not resume with every index in place (copied %d rows, %d deferred indexes)", res.RowsCopied, res.DeferredIndex)
	}
	if res.Verify == nil || res.Verify.Repaired > 0 {
		t.Fatalf("verify had to repair the shadow after the resume (%+v)", res.Verify)
	}
	if diff := sameRows(t, db, schema, "t", "ref", uniqueColumns, "id"); diff != "" {
		t.Fatalf("converted table differs from the reference: %s", diff)
	}
	if diff := sameRows(t, db, schema, "ref", "t", uniqueColumns, "id"); diff != "" {
		t.Fatalf("reference differs from the converted table: %s", diff)
	}
}

// galeraUnique: apply on node 1 of a table with a unique secondary index (uq, NULLable, every
// index in the shadow from the start as on every Galera node) under writers there that keep
// moving uq values between rows: verification repairs nothing, t equals the reference (every
// acknowledged write, nothing else), and every node has the same InnoDB rows, all synced.
func galeraUnique(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	db := openControl(t, c.Nodes[0])
	ws := seedUnique(t, db, schema, 3000, 3, 23)
	stop := runWriters(ws, appPause)
	defer stop()
	time.Sleep(100 * time.Millisecond)
	opts := testOptions(c.Nodes[0], schema, "t")
	// Many small copy chunks under the writers; verification at apply's chunk time.
	res, err := runBounded(withHooks(context.Background(), faults.Hooks{CopyChunkTime: 2 * time.Millisecond}), t, opts, c)
	time.Sleep(200 * time.Millisecond) // writes to the converted table must land too
	stop()
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	checkWriters(t, ws)
	var acked int64
	for _, w := range ws {
		acked += w.acked.Load()
	}
	t.Logf("apply: %d rows copied, %d changes replayed, %d writes acknowledged, verify %+v, %d deferred indexes", res.RowsCopied, res.CaptureChanges, acked, res.Verify, res.DeferredIndex)
	if res.DeferredIndex != 0 || acked < 200 || res.CaptureChanges == 0 {
		t.Fatalf("the run did not exercise the shadow's unique index under writers (deferred %d, acked %d, replayed %d)", res.DeferredIndex, acked, res.CaptureChanges)
	}
	if res.Verify == nil || res.Verify.Repaired > 0 {
		t.Fatalf("verify had to repair the shadow (%+v): copy and replay lost or resurrected rows", res.Verify)
	}
	if diff := sameRows(t, db, schema, "t", "ref", uniqueColumns, "id"); diff != "" {
		t.Fatalf("converted table differs from the reference: %s", diff)
	}
	if diff := sameRows(t, db, schema, "ref", "t", uniqueColumns, "id"); diff != "" {
		t.Fatalf("reference differs from the converted table: %s", diff)
	}
	galeraSame(t, c, schema, "t")

	// Rollback replays the InnoDB table's changes into the MyISAM original, which has the unique
	// index, under the same writers.
	stop = runWriters(ws, appPause)
	ropts := rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger, Cutover: cutover.DefaultConfig()}
	rres, err := rollbackBounded(context.Background(), t, db, ropts, c)
	time.Sleep(200 * time.Millisecond)
	stop()
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	checkWriters(t, ws)
	t.Logf("rollback: %d changes replayed", rres.CaptureChanges)
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
		t.Fatalf("t is %s after the rollback", e)
	}
	if diff := sameRows(t, db, schema, "t", "ref", uniqueColumns, "id"); diff != "" {
		t.Fatalf("after the rollback the table differs from the reference: %s", diff)
	}
	if diff := sameRows(t, db, schema, "ref", "t", uniqueColumns, "id"); diff != "" {
		t.Fatalf("after the rollback the reference differs from the table: %s", diff)
	}
}
