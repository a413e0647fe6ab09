package migration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/bench/arrival"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
)

// keylessDDL is allTypesDDL without a unique key: id is indexed but not unique, and the copy walks
// it (more distinct than a_k, a non-unique index on k): the writers' id changes move rows along it
// (across chunks).
var keylessDDL = strings.NewReplacer("id INT NOT NULL AUTO_INCREMENT,", "id INT NOT NULL,",
	"PRIMARY KEY (id),", "KEY id (id),", "KEY k (k),", "KEY a_k (k),").Replace(allTypesDDL)

// noIndexDDL has no index a chunk can walk (only a prefix of a string): one chunk, and each
// replayed change scans the target.
var noIndexDDL = strings.NewReplacer("id INT NOT NULL AUTO_INCREMENT,", "id INT NOT NULL,",
	"PRIMARY KEY (id),", "", "KEY k (k),", "").Replace(allTypesDDL)

// nullUniqueDDL's only unique key has a NULLable column, so it addresses no row (two NULLs do
// not collide); its first column is the chunk key.
var nullUniqueDDL = strings.NewReplacer("id INT NOT NULL AUTO_INCREMENT,", "id INT NOT NULL,",
	"PRIMARY KEY (id),", "UNIQUE KEY id (id, ti),").Replace(allTypesDDL)

// walkDDL is noIndexDDL with key as its only index a chunk can walk (the prefix index on vc
// goes), and dt a DATETIME(6).
func walkDDL(key string) string {
	return strings.NewReplacer("KEY vc (vc(10))", key, "dt DATETIME(3) NULL", "dt DATETIME(6) NULL").Replace(noIndexDDL)
}

// crowdedRow is randomRow with many rows sharing a value of the columns the keyless tests' indexes
// lead with (a chunk then cannot end inside the run: it takes it whole): vc from a few values
// equal in utf8mb4_unicode_ci that differ in case and trailing spaces (and one with a tab, which
// sorts before them), dt and d a third of the time one value (or one a microsecond or 0.0001
// apart); e has three members anyway. Every column stays NULL an eighth of the time.
func crowdedRow(r *rand.Rand) []any {
	row := randomRow(r)
	const d, dt, vc = 4, 7, 15 // positions in randomRow
	if row[vc] != nil && r.IntN(2) == 0 {
		row[vc] = crowdedVC(r)
	}
	if row[dt] != nil && r.IntN(3) == 0 {
		row[dt] = []string{"2020-02-02 02:02:02.020000", "2020-02-02 02:02:02.020001"}[r.IntN(4)/3]
	}
	if row[d] != nil && r.IntN(3) == 0 {
		row[d] = []string{"12.3400", "12.3401", "-0.0001"}[r.IntN(6)/2%3]
	}
	return row
}

func crowdedVC(r *rand.Rand) string {
	return []string{"same", "Same", "SAME", "same ", "Same  ", "sAmE", "same\t", "other", "OTHER "}[r.IntN(9)]
}

// keylessWriter is the application mix by id (writer.step) plus what only a table without a unique
// key allows: identical rows, and statements that change one of them (LIMIT 1).
type keylessWriter struct {
	*writer
	dups   []int64 // ids that hold two or more identical rows
	noDups bool    // a unique key forbids them
}

func (w *keylessWriter) step(ctx context.Context) {
	switch op := w.r.IntN(12); {
	case w.noDups:
		w.writer.step(ctx)
	// Pairs are made twice as often as copies go or change, so that duplicates stay however long
	// the conversion runs.
	case op == 0 || op == 3: // an identical pair
		w.next++
		row := append([]any{w.next}, w.row()...)
		ins := "INSERT INTO {T} (id," + rowCols + ") VALUES (?," + rowPlaceholders + "),(?," + rowPlaceholders + ")"
		if w.exec(ctx, ins, append(slices.Clone(row), row...)...) {
			w.dups = append(w.dups, w.next)
		}
	// Once one copy went or changed, the id's rows are no longer interchangeable: which one a
	// LIMIT 1 picks would depend on the engine, so the id is left alone from then on.
	case op == 1 && len(w.dups) > 0: // one copy of a duplicated row goes
		i := w.r.IntN(len(w.dups))
		w.exec(ctx, "DELETE FROM {T} WHERE id=? LIMIT 1", w.dups[i])
		w.dups = slices.Delete(w.dups, i, i+1)
	case op == 2 && len(w.dups) > 0: // one copy of a duplicated row changes (and moves along k)
		i := w.r.IntN(len(w.dups))
		vc := fmt.Sprint("one of ", w.r.IntN(100))
		if w.crowd {
			vc = crowdedVC(w.r)
		}
		w.exec(ctx, "UPDATE {T} SET k=k+7, vc=? WHERE id=? LIMIT 1", vc, w.dups[i])
		w.dups = slices.Delete(w.dups, i, i+1)
	default:
		w.writer.step(ctx)
	}
}

// rowMultiset reads every row of a table as text, sorted: equal multisets give equal slices.
func rowMultiset(t *testing.T, db *sql.DB, schema, tbl string) []string {
	t.Helper()
	var exprs []string
	for _, c := range allTypesColumns {
		q := dbconn.QuoteIdent(c)
		exprs = append(exprs, "ISNULL("+q+")", "HEX(CAST("+q+" AS BINARY))")
	}
	rows, err := db.Query("SELECT CONCAT_WS('|', " + strings.Join(exprs, ",") + ") FROM " + dbconn.QualifiedName(schema, tbl))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func sameMultiset(t *testing.T, db *sql.DB, schema, a, b string) {
	t.Helper()
	ra, rb := rowMultiset(t, db, schema, a), rowMultiset(t, db, schema, b)
	if slices.Equal(ra, rb) {
		return
	}
	only := func(x, y []string) int {
		n := 0
		for _, r := range x {
			if i, ok := slices.BinarySearch(y, r); ok {
				y = slices.Delete(slices.Clone(y), i, i+1)
			} else {
				n++
			}
		}
		return n
	}
	t.Fatalf("%s (%d rows) and %s (%d rows) differ: %d rows only in %s, %d only in %s", a, len(ra), b, len(rb), only(ra, rb), a, only(rb, ra), b)
}

// keylessCase is one table of the keyless tests under writers.
type keylessCase struct {
	name  string
	ddl   string
	rows  int
	dups  bool
	crash bool
	keep  bool   // --keep-keyless: no row id
	trig  bool   // trigger capture, on a server without a binlog
	walks string // the index the copy must walk, and its columns ("" none)
	crowd bool   // rows from crowdedRow
}

var keylessCases = []keylessCase{
	{"non-unique index", keylessDDL, 3000, true, false, false, false, "id(id)", false},
	{"no index to walk, kept keyless", noIndexDDL, 3000, true, false, true, false, "", false},
	{"unique key with NULLs", nullUniqueDDL, 2000, false, false, false, false, "id(id,ti)", false},
	{"resumed after a crash", keylessDDL, 2000, true, true, false, false, "id(id)", false},
	{"trigger capture", keylessDDL, 2000, true, false, false, true, "id(id)", false},
	// Indexes led by columns other than integers, all NULLable, each with runs of equal
	// leading values longer than a chunk (crowdedRow); e is an ENUM whose members are
	// defined out of alphabetical order (red, green, blue), its index's order.
	{"DATETIME(6) index", walkDDL("KEY dt (dt)"), 1000, true, false, false, false, "dt(dt)", true},
	{"DECIMAL index", walkDDL("KEY d (d)"), 1000, true, false, false, false, "d(d)", true},
	{"case-insensitive VARCHAR index", walkDDL("KEY vc (vc)"), 1000, true, false, false, false, "vc(vc)", true},
	{"(VARCHAR, DATETIME) index", walkDDL("KEY vc_dt (vc, dt)"), 1000, true, false, false, false, "vc_dt(vc,dt)", true},
	{"(ENUM, DATETIME) index", walkDDL("KEY e_dt (e, dt)"), 1000, true, false, false, false, "e_dt(e,dt)", true},
	{"trigger capture, (VARCHAR, DATETIME) index", walkDDL("KEY vc_dt (vc, dt)"), 1000, true, false, false, true, "vc_dt(vc,dt)", true},
	{"trigger capture, (ENUM, DECIMAL) index", walkDDL("KEY e_d (e, d)"), 1000, true, false, false, true, "e_d(e,d)", true},
}

// TestKeylessTableUnderWriters converts tables without a unique key while writers run the
// application mix and change single copies of identical rows, through the cut-over and a while
// after, then rolls them back under the same writers: every acknowledged write is in the table
// (same multiset of rows as a reference table that got the same writes), verification found
// nothing to repair (rule 5 left no change out and wrote none twice), duplicates stay duplicates.
// One case dies during the copy first: the next run starts the copy again. These are the binlog
// cases, on the package's shared server; TestKeylessTableUnderWritersWithTriggerCapture has the
// others.
func TestKeylessTableUnderWriters(t *testing.T) {
	for _, c := range keylessCases {
		if !c.trig {
			t.Run(c.name, func(st *testing.T) {
				keylessUnderWriters(st, srv, c.ddl, c.walks, c.rows, c.dups, c.crash, c.keep, c.crowd)
			})
		}
	}
}

// TestKeylessTableUnderWritersWithTriggerCapture is TestKeylessTableUnderWriters' trigger-capture
// cases, on a server of its own without a binlog.
func TestKeylessTableUnderWritersWithTriggerCapture(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	opts := sandbox.Options{BinlogFormat: "OFF"}
	if f, _ := sandboxtest.Flavour(); strings.HasPrefix(string(f), "mysql") {
		// MySQL's default enforce_gtid_consistency refuses trigger capture (plan says so).
		opts.ExtraArgs = []string{"--gtid-mode=OFF", "--enforce-gtid-consistency=OFF"}
	}
	s := sandboxtest.ForTest(t, opts)
	for _, c := range keylessCases {
		if c.trig {
			t.Run(c.name, func(st *testing.T) {
				keylessUnderWriters(st, s, c.ddl, c.walks, c.rows, c.dups, c.crash, c.keep, c.crowd)
			})
		}
	}
}

func keylessUnderWriters(t *testing.T, srv *sandbox.Server, ddl, walks string, rows int, dups, crash, keep, crowd bool) {
	schema, _ := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	ws := seedKeyless(t, db, schema, ddl, rows, dups, crowd)
	ti, err := table.Load(context.Background(), db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	if ix, ok := ti.ChunkKey(); ok {
		got = ix.Name + "(" + strings.Join(ix.ColumnNames(), ",") + ")"
	}
	if got != walks {
		t.Fatalf("the copy would walk %q, the test is about %q", got, walks)
	}
	run := func(what string, fn func() error) {
		t.Helper()
		stop := runKeyless(ws)
		err := fn()
		time.Sleep(300 * time.Millisecond) // writes after the swap must land in the new table
		stop()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, w := range ws {
			if len(w.failures) > 0 {
				t.Fatalf("%s: writer %d: %d failed writes, first: %s", what, w.id, len(w.failures), w.failures[0])
			}
		}
		sameMultiset(t, db, schema, "t", "ref")
	}
	opts := testOptions(srv, schema, "t")
	// A copy in many chunks: many changes on each side of a chunk's read. Verification runs at
	// apply's own pace: its chunks are not what this test is about, and at 2 ms they made it
	// most of the test's time (docs/testing.md).
	// Short chunks from the first: many chunk bounds in a small table.
	hooks := faults.Hooks{CopyChunkTime: 2 * time.Millisecond, FirstChunk: 50}
	opts.KeepKeyless = keep
	if crowd {
		// Short chunks while idle too: several bounds inside runs of equal values.
		hooks.IdleChunkTime = hooks.CopyChunkTime
	}
	// The one-chunk case holds writes for about a second on an idle machine; on a busy one the
	// estimate passes plan's 1 s keyless-hold limit (its own test is in plan), which is not what
	// this test is about.
	opts.MaxHold = time.Minute
	if crash {
		hooks.CrashAfterRows = int64(rows / 2)
		if _, err := Run(withHooks(context.Background(), hooks), db, opts); err == nil {
			t.Fatal("the run meant to die during the copy succeeded")
		}
		hooks.CrashAfterRows = 0
	}
	run("apply", func() error {
		res, err := Run(withHooks(context.Background(), hooks), db, opts)
		if err == nil {
			t.Logf("copied %d rows, replayed %d changes, verify %+v", res.RowsCopied, res.CaptureChanges, res.Verify)
			if res.Verify == nil || res.Verify.Repaired > 0 {
				return fmt.Errorf("verify had to repair the shadow (%+v): rule 5 lost or doubled changes", res.Verify)
			}
		}
		return err
	})
	if e := engineOf(t, db, schema, "t"); e != "InnoDB" {
		t.Fatalf("t is %s after apply", e)
	}
	// The row id is the primary key, numbered, and invisible: SELECT * shows the table's columns.
	var withID, all int
	db.QueryRow("SELECT COUNT("+table.RowIDColumn+"), COUNT(DISTINCT "+table.RowIDColumn+") FROM "+dbconn.QualifiedName(schema, "t")).Scan(&withID, &all)
	star, err := db.Query("SELECT * FROM " + dbconn.QualifiedName(schema, "t") + " LIMIT 1")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := star.Columns()
	star.Close()
	switch {
	case len(cols) != len(allTypesColumns):
		t.Fatalf("SELECT * returns %d columns, the table had %d", len(cols), len(allTypesColumns))
	case keep && withID > 0:
		t.Fatal("--keep-keyless: the table got a row id")
	case !keep && (withID == 0 || withID != all):
		t.Fatalf("row id: %d rows numbered, %d distinct", withID, all)
	}
	var dupGroups int
	db.QueryRow("SELECT COUNT(*) FROM (SELECT id FROM " + dbconn.QualifiedName(schema, "t") + " GROUP BY " + strings.Join(allTypesColumns, ",") + " HAVING COUNT(*) > 1) d").Scan(&dupGroups)
	if dups && dupGroups < rows/20 {
		t.Fatalf("only %d groups of identical rows left: the test lost what it is about", dupGroups)
	}
	run("rollback", func() error {
		_, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema, Logger: opts.Logger})
		return err
	})
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
		t.Fatalf("t is %s after rollback", e)
	}
}

// seedKeyless creates t and ref from ddl with the same rows (every third one twice when dups),
// and returns four writers that own them; with crowd, rows come from crowdedRow.
func seedKeyless(t *testing.T, db *sql.DB, schema, ddl string, rows int, dups, crowd bool) []*keylessWriter {
	t.Helper()
	const writers = 4
	r := rand.New(rand.NewPCG(7, 1))
	ws := make([]*keylessWriter, writers)
	for i := range ws {
		ws[i] = &keylessWriter{writer: &writer{db: db, schema: schema, id: i, next: int64(i+1) * 10_000_000, r: rand.New(rand.NewPCG(7, uint64(i)+2)), crowd: crowd}, noDups: !dups}
	}
	for _, tbl := range []string{"t", "ref"} {
		sandboxtest.MustExec(t, db, fmt.Sprintf(ddl, dbconn.QualifiedName(schema, tbl)))
	}
	for start := 1; start <= rows; start += 500 {
		var vals []string
		var args []any
		for id := start; id < start+500 && id <= rows; id++ {
			var row []any
			if crowd {
				row = append([]any{id}, crowdedRow(r)...)
			} else {
				row = append([]any{id}, randomRow(r)...)
			}
			copies := 1
			if dups && id%3 == 0 {
				copies = 2
			}
			for range copies {
				vals = append(vals, "(?,"+rowPlaceholders+")")
				args = append(args, row...)
			}
			w := ws[id%writers]
			if copies > 1 {
				w.dups = append(w.dups, int64(id))
			} else {
				w.ids = append(w.ids, int64(id))
			}
		}
		for _, tbl := range []string{"t", "ref"} {
			if _, err := db.Exec("INSERT INTO "+dbconn.QualifiedName(schema, tbl)+" (id,"+rowCols+") VALUES "+strings.Join(vals, ","), args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ws
}

const keylessPause = appPause

func runKeyless(ws []*keylessWriter) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(ws))
	start := time.Now()
	for i, w := range ws {
		go func() {
			defer func() { done <- struct{}{} }()
			// An application, not a bulk load (appPause, 6 ms): replay finds each change's row of
			// a keyless table through an index scan, a few thousand a second here, and at 3 ms the
			// replay fell behind for a minute of verification in CI.
			slots := arrival.NewSlots(start.Add(time.Duration(i)*keylessPause/time.Duration(len(ws))), keylessPause)
			for slots.Wait(ctx) == nil {
				w.step(ctx)
			}
		}()
	}
	return func() {
		cancel()
		for range ws {
			<-done
		}
	}
}

// TestKeylessReplicaKeepsUp converts a keyless table on a primary with a ROW binlog while writers
// run, and the replica must end with the same rows in the converted table, and the replica
// InnoDB with the added primary key too: every row event on it is then found by that key instead
// of a scan, so its SQL thread keeps up with the writes that follow.
func TestKeylessReplicaKeepsUp(t *testing.T) {
	t.Parallel() // servers of its own (docs/testing.md, "Parallel tests")
	primary := sandboxtest.ForTest(t, sandbox.Options{})
	replica := sandboxtest.ReplicaForTest(t, primary, sandbox.Options{})
	schema, _ := sandboxtest.FreshDatabase(t, primary)
	db := openControl(t, primary)
	ws := seedKeyless(t, db, schema, keylessDDL, 2000, true, false)
	ctx := context.Background()
	stop := runKeyless(ws)
	opts := testOptions(primary, schema, "t")
	opts.ChunkTime = 2 * time.Millisecond
	_, err := Run(ctx, db, opts)
	time.Sleep(time.Second) // writes on the converted table replicate by its key
	stop()
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := sandbox.SyncReplica(waitCtx, primary, replica); err != nil {
		t.Fatalf("the replica did not catch up: %v", err)
	}
	rdb := openControl(t, replica)
	if e := engineOf(t, rdb, schema, "t"); e != "InnoDB" {
		t.Fatalf("replica's t is %s", e)
	}
	sameMultiset(t, db, schema, "t", "ref")
	if p, r := rowMultiset(t, db, schema, "t"), rowMultiset(t, rdb, schema, "t"); !slices.Equal(p, r) {
		t.Fatalf("replica's t (%d rows) differs from the primary's (%d rows)", len(r), len(p))
	}
	var pk int
	rdb.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=? AND TABLE_NAME='t' AND INDEX_NAME='PRIMARY' AND COLUMN_NAME=?", schema, table.RowIDColumn).Scan(&pk)
	if pk != 1 {
		t.Fatal("the replica's table has no row id primary key")
	}
}
