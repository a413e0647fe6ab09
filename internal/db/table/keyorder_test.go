package table

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// KeyOrder must order chunk-key values exactly as the server's index does (rule 5 places each
// replayed change of a keyless table in a chunk by it): every pair of values, read as the copy
// reads its chunk bounds (SQL.Bound, in a row session), compares as the server ranks them
// (DENSE_RANK over the index's order, equal in the collation included). The values are the
// awkward ones: case and trailing spaces in a PAD SPACE collation (and a tab, which sorts before
// a space), accents, a NO PAD collation, negative and long decimals, fractions of a second,
// negative and long times, an ENUM whose members' names sort otherwise than their places (and
// its error value, the empty string, which INSERT IGNORE stores for a name it does not have), NULL. The range
// predicates on each value as a bound (SQL.Where) hold the rows the server ranks on each side,
// and a chunk reads its range through the index (chunkReadsItsRange).
func TestKeyOrderFollowsTheServer(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	ctx := context.Background()
	rowDB, err := dbconn.OpenRowWriter(ctx, dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rowDB.Close()
	noPad := "utf8mb4_nopad_bin"
	if f, _ := sandboxtest.Flavour(); strings.HasPrefix(string(f), "mysql") {
		noPad = "utf8mb4_0900_ai_ci"
	}
	for _, c := range []struct {
		typ  string
		vals []string
	}{
		{"VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", []string{"'a'", "'A'", "'a '", "'A  '", "'a\\t'", "''", "' '", "'ab'", "'b'", "'é'", "'E'", "'ß'", "'ss'", "'日本'", "NULL"}},
		{"VARCHAR(12) CHARACTER SET utf8mb4 COLLATE " + noPad, []string{"'a'", "'A'", "'a '", "'a\\t'", "''", "' '", "'ab'", "'b'", "NULL"}},
		{"CHAR(6) CHARACTER SET latin1", []string{"'a'", "'A'", "'a '", "'a\\t'", "''", "'é'", "'e'", "'z'", "NULL"}},
		{"DECIMAL(30,10)", []string{"0", "-0.0000000001", "0.0000000001", "-12.5", "-12.49", "12.5", "99999999999999999999.9999999999", "99999999999999999999.9999999998", "-99999999999999999999.9999999999", "1", "NULL"}},
		{"DATETIME(6)", []string{"'2024-01-01 00:00:00'", "'2024-01-01 00:00:00.000001'", "'2023-12-31 23:59:59.999999'", "'0000-00-00 00:00:00'", "'9999-12-31 23:59:59.999999'", "NULL"}},
		{"TIMESTAMP(3) NULL", []string{"'2024-03-31 01:59:59.999'", "'2024-03-31 02:00:00'", "'1970-01-01 00:00:01'", "'2038-01-19 03:14:07.499'", "NULL"}},
		{"DATE", []string{"'2024-01-02'", "'2024-01-01'", "'0000-00-00'", "'1999-12-31'", "NULL"}},
		{"TIME(2)", []string{"'-838:59:59'", "'-00:00:00.01'", "'00:00:00'", "'838:59:59'", "'100:00:00'", "'23:59:59.99'", "'-1:00:00'", "NULL"}},
		{"BIGINT UNSIGNED", []string{"0", "18446744073709551615", "9223372036854775808", "NULL"}},
		{"YEAR", []string{"2024", "1901", "2155", "0", "NULL"}},
		{"ENUM('red','green','blue','ápple','Zed') CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", []string{"'red'", "'RED'", "'green'", "'blue'", "'ápple'", "'zed'", "'none of them'", "NULL"}},
	} {
		t.Run(c.typ, func(t *testing.T) {
			sandboxtest.MustExec(t, db, "DROP TABLE IF EXISTS "+dbconn.QualifiedName(schema, "o"),
				"CREATE TABLE "+dbconn.QualifiedName(schema, "o")+" (v "+c.typ+", KEY (v)) ENGINE=MyISAM",
				"INSERT IGNORE INTO "+dbconn.QualifiedName(schema, "o")+" VALUES ("+strings.Join(c.vals, "),(")+")")
			ti, err := Load(ctx, db, schema, "o")
			if err != nil {
				t.Fatal(err)
			}
			q, err := NewSQL(ti, "o")
			if err != nil {
				t.Fatal(err)
			}
			o := q.KeyOrder()
			if o == nil || o.Columns() != 1 {
				t.Fatalf("%s: no chunk key", c.typ)
			}
			vals, ranks := rankedBounds(t, rowDB, q, dbconn.QualifiedName(schema, "o"))
			weights := weightsOf(t, rowDB, o, vals)
			for i := range vals {
				for j := range vals {
					got, err := o.Compare([]any{vals[i]}, []any{vals[j]}, weights)
					if err != nil {
						t.Fatal(err)
					}
					if want := cmpInt(int64(ranks[i]), int64(ranks[j])); got != want {
						t.Errorf("%s: %s vs %s: Go says %d, the server's order %d", c.typ, show(vals[i]), show(vals[j]), got, want)
					}
				}
			}
			// Each value as a chunk bound: the ranges after it and up to it hold the rows the
			// server ranks after it and not after it.
			for i, v := range vals {
				after := 0
				for _, r := range ranks {
					if r > ranks[i] {
						after++
					}
				}
				for _, side := range []struct {
					name string
					r    Range
					want int
				}{{"after", Range{Lo: []any{v}}, after}, {"up to", Range{Hi: []any{v}}, len(ranks) - after}} {
					query, args := q.Checksum(side.r, false)
					var n int
					var sum string
					if err := rowDB.QueryRowContext(ctx, query, args...).Scan(&n, &sum); err != nil {
						t.Fatal(err)
					}
					if n != side.want {
						t.Errorf("%s: %d rows %s %s, the server ranks %d there", c.typ, n, side.name, show(v), side.want)
					}
				}
			}
			chunkReadsItsRange(t, db, rowDB, q, dbconn.QualifiedName(schema, "o"), vals, ranks)
		})
	}
}

// rankedBounds reads tbl's values in the index's order as a chunk bound reads them (q.Bound, in
// a row session), and their ranks in that order: ranks do not decrease along the order, so rows
// equal in it may come in any order.
func rankedBounds(t *testing.T, rowDB *sql.DB, q *SQL, tbl string) (vals []any, ranks []int) {
	t.Helper()
	rows, err := rowDB.Query("SELECT DENSE_RANK() OVER (ORDER BY v) r FROM " + tbl + " ORDER BY r")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r int
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		ranks = append(ranks, r)
	}
	for i := range ranks {
		query, args := q.Bound(nil)
		v, err := dbconn.ScanValues(rowDB.QueryRow(query, append(args, i)...), 1)
		if err != nil {
			t.Fatal(err)
		}
		vals = append(vals, v[0])
	}
	return vals, ranks
}

// weightsOf reads the weights of vals if o weighs them.
func weightsOf(t *testing.T, rowDB *sql.DB, o *KeyOrder, vals []any) testWeights {
	t.Helper()
	weights := testWeights{w: map[string][]byte{}}
	if !o.Weighed(0) {
		return weights
	}
	var pad bool
	if err := rowDB.QueryRow(o.CollationQuery(0)).Scan(&pad, &weights.space); err != nil {
		t.Fatal(err)
	}
	if !pad {
		weights.space = nil
	}
	for _, v := range vals {
		if v == nil {
			continue
		}
		var w []byte
		if err := rowDB.QueryRow(o.WeightQuery(0, 1), v).Scan(&w); err != nil {
			t.Fatal(err)
		}
		weights.w[string(v.([]byte))] = w
	}
	return weights
}

// chunkReadsItsRange: a chunk's read finds its rows through the index and reads little else
// (an ENUM compared by <, > or NOT IN is read whole; its lists of members are ranges), counted
// by the session's handler reads with every value in tbl copied 40 times. The chunk is a run of
// equal values in the middle of the order.
func chunkReadsItsRange(t *testing.T, db, rowDB *sql.DB, q *SQL, tbl string, vals []any, ranks []int) {
	t.Helper()
	const copies = 40
	sandboxtest.MustExec(t, db, "INSERT IGNORE INTO "+tbl+" SELECT o.v FROM "+tbl+" o, "+sandboxtest.Seq(copies-1)) // IGNORE: zero dates
	i := len(vals) / 2
	for i > 0 && ranks[i-1] == ranks[i] {
		i--
	}
	j := i
	for j < len(vals) && ranks[j] == ranks[i] {
		j++
	}
	if i == 0 || j == len(vals) {
		t.Fatalf("no run of equal values between others in %v", ranks)
	}
	inRange := (j - i) * copies
	conn, err := rowDB.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	query, args := q.ReadRange(Range{Lo: []any{vals[i-1]}, Hi: []any{vals[j-1]}})
	before := handlerReads(t, conn)
	rows, err := conn.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for rows.Next() {
		got++
	}
	rows.Close()
	n := handlerReads(t, conn) - before
	t.Logf("%d rows, %d index reads: %s %v", got, n, query, args)
	if got != inRange || n < inRange || n > inRange+copies/2 {
		t.Errorf("a chunk of %d rows read %d rows and %d through the index: %s %v", inRange, got, n, query, args)
	}
}

type testWeights struct {
	w     map[string][]byte
	space []byte
}

func (t testWeights) Weight(_ int, v any) []byte { return t.w[string(v.([]byte))] }
func (t testWeights) SpaceWeight(int) []byte     { return t.space }

func show(v any) string {
	if b, ok := v.([]byte); ok {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprint(v)
}

// A NULL part of a chunk-key bound is spelled IS NULL / IS NOT NULL (NULL sorts first), a
// DECIMAL part is cast to its type (as text it would be compared as a double), an ENUM part is a
// list of member numbers (a range comparison of an ENUM is a scan on every server), and the
// upper end is spelled without NOT (NOT e IN (...) is a scan too).
func TestRangePredicateWithNulls(t *testing.T) {
	parts := []keyPart{{col: "`a`", ph: "?", null: true}, {col: "`b`", ph: "CAST(? AS decimal(9,2))", null: true}}
	for _, c := range []struct {
		upTo bool
		v    []any
		want string
		args []any
	}{
		{false, []any{nil, "1.5"}, "((`a` IS NOT NULL) OR (`a` IS NULL AND `b` IS NOT NULL AND `b` > CAST(? AS decimal(9,2))))", []any{"1.5"}},
		{false, []any{"x", "1.5"}, "((`a` IS NOT NULL AND `a` > ?) OR (`a` <=> ? AND `b` IS NOT NULL AND `b` > CAST(? AS decimal(9,2))))", []any{"x", "x", "1.5"}},
		{true, []any{nil, "1.5"}, "((`a` IS NULL AND (`b` IS NULL OR `b` <= CAST(? AS decimal(9,2)))))", []any{"1.5"}},
		{true, []any{"x", nil}, "(((`a` IS NULL OR `a` < ?)) OR (`a` <=> ? AND `b` IS NULL))", []any{"x", "x"}},
	} {
		got, args := afterKey(parts, c.v)
		if c.upTo {
			got, args = upToKey(parts, c.v)
		}
		if got != c.want || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%v (up to %v): got %s %v, want %s %v", c.v, c.upTo, got, args, c.want, c.args)
		}
	}
	enum := []keyPart{{col: "`e`", ph: "?", enum: 3}, {col: "`n`", ph: "?"}}
	for _, c := range []struct {
		upTo bool
		v    []any
		want string
		args []any
	}{
		{false, []any{[]byte("1"), int64(7)}, "((`e` IN (?,?)) OR (`e` = ? AND `n` > ?))", []any{int64(2), int64(3), int64(1), int64(7)}},
		{false, []any{int64(3), int64(7)}, "((`e` = ? AND `n` > ?))", []any{int64(3), int64(7)}},
		{true, []any{int64(0), int64(7)}, "((`e` = ? AND `n` <= ?))", []any{int64(0), int64(7)}},
		{true, []any{int64(2), int64(7)}, "((`e` IN (?,?)) OR (`e` = ? AND `n` <= ?))", []any{int64(0), int64(1), int64(2), int64(7)}},
		{true, []any{int64(2)}, "((`e` IN (?,?,?)))", []any{int64(0), int64(1), int64(2)}},
		{false, []any{int64(3)}, "FALSE", nil},
	} {
		got, args := afterKey(enum[:len(c.v)], c.v)
		if c.upTo {
			got, args = upToKey(enum[:len(c.v)], c.v)
		}
		if got != c.want || !reflect.DeepEqual(args, c.args) {
			t.Errorf("ENUM %v (up to %v): got %s %v, want %s %v", c.v, c.upTo, got, args, c.want, c.args)
		}
	}
}

// An ENUM's members are counted from its type as information_schema spells it: a name may hold
// commas, parentheses and quotes (doubled).
func TestEnumMembers(t *testing.T) {
	for typ, want := range map[string]int{"enum('red','green','blue')": 3, "enum('a,b','c''d','(x)',''',''')": 4,
		"enum('')": 1, "set('a','b')": 0, "varchar(3)": 0} {
		if got := (Column{ColumnType: typ}).EnumMembers(); got != want {
			t.Errorf("%s: %d members, want %d", typ, got, want)
		}
	}
	names := Column{ColumnType: `enum('a,b','c''d','(x)',''',''','')`}.EnumNames()
	if want := []string{"a,b", "c'd", "(x)", "','", ""}; !reflect.DeepEqual(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
}

// A keyed table whose key leads with an ENUM is walked as its index orders it (by member
// number; the names here sort otherwise): chunks cut by Bound, as the copy cuts them, each hold
// the rows asked for and read them through the index, and together hold every row once. Its
// ranges once compared the ENUM with names: as text, so the first chunk held the rows of every
// member whose name sorts before the first row's, and each chunk scanned the whole index.
func TestEnumKeyWalksInIndexOrder(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	ctx := context.Background()
	rowDB, err := dbconn.OpenRowWriter(ctx, dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}, schema, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rowDB.Close()
	const members, per, chunk = 5, 60, 25
	sandboxtest.MustExec(t, db, "CREATE TABLE k (e ENUM('red','green','blue','ápple','Zed') CHARACTER SET utf8mb4 NOT NULL, i INT NOT NULL, PRIMARY KEY (e, i)) ENGINE=MyISAM",
		fmt.Sprintf("INSERT INTO k SELECT m.seq, n.seq FROM (SELECT seq FROM %s) m CROSS JOIN (SELECT seq FROM %s) n", sandboxtest.Seq(members), sandboxtest.Seq(per)))
	ti, err := Load(ctx, db, schema, "k")
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewSQL(ti, "k2")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rowDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var lo []any
	seen := map[string]int{}
	for chunks := 0; ; chunks++ {
		if chunks > 2*members*per/chunk {
			t.Fatalf("%d chunks of %d rows and not done", chunks, chunk)
		}
		bq, bargs := q.Bound(lo)
		var e string
		var i int
		r := Range{Lo: lo}
		switch err := conn.QueryRowContext(ctx, bq, append(bargs, chunk-1)...).Scan(&e, &i); {
		case err == sql.ErrNoRows:
		case err != nil:
			t.Fatal(err)
		default:
			r.Hi = []any{e, i}
		}
		before := handlerReads(t, conn)
		rq, rargs := q.ReadRange(r)
		rows, err := conn.QueryContext(ctx, rq, rargs...)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for rows.Next() {
			var re string
			var ri int
			if err := rows.Scan(&re, &ri); err != nil {
				t.Fatal(err)
			}
			seen[fmt.Sprint(re, "/", ri)]++
			got++
		}
		rows.Close()
		if n := handlerReads(t, conn) - before; got > chunk || n > got+2 {
			t.Errorf("chunk %d (%v, %v]: %d rows, %d index reads; want at most %d rows, each read once: %s %v", chunks, lo, r.Hi, got, n, chunk, rq, rargs)
		}
		if r.Hi == nil {
			break
		}
		lo = r.Hi
	}
	if len(seen) != members*per {
		t.Errorf("the chunks held %d distinct rows of %d", len(seen), members*per)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("row %s in %d chunks", k, n)
		}
	}
}

// handlerReads is the session's index reads so far (Handler_read_key and Handler_read_next).
func handlerReads(t *testing.T, conn *sql.Conn) (n int) {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key', 'Handler_read_next')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}
