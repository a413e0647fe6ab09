package table

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox/sandboxtest"
)

// KeyOrder must order chunk-key values exactly as the server's index does (rule 5 places each
// replayed change of a keyless table in a chunk by it): every pair of values, read as the row
// sessions read them, compares as the server ranks them (DENSE_RANK over the index's order,
// equal in the collation included). The values are the awkward ones: case and trailing spaces
// in a PAD SPACE collation (and a tab, which sorts before a space), accents, a NO PAD collation,
// negative and long decimals, fractions of a second, negative and long times, NULL.
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
	} {
		t.Run(c.typ, func(t *testing.T) {
			sandboxtest.MustExec(t, db, "DROP TABLE IF EXISTS "+dbconn.QualifiedName(schema, "o"),
				"CREATE TABLE "+dbconn.QualifiedName(schema, "o")+" (v "+c.typ+", KEY (v)) ENGINE=MyISAM",
				"INSERT INTO "+dbconn.QualifiedName(schema, "o")+" VALUES ("+strings.Join(c.vals, "),(")+")")
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
			rows, err := rowDB.QueryContext(ctx, "SELECT v, DENSE_RANK() OVER (ORDER BY v) FROM "+dbconn.QualifiedName(schema, "o"))
			if err != nil {
				t.Fatal(err)
			}
			var vals []any
			var ranks []int
			for rows.Next() {
				var v any
				var r int
				if err := rows.Scan(&v, &r); err != nil {
					t.Fatal(err)
				}
				vals, ranks = append(vals, v), append(ranks, r)
			}
			rows.Close()
			weights := testWeights{w: map[string][]byte{}}
			if o.Weighed(0) {
				var pad bool
				if err := rowDB.QueryRowContext(ctx, o.CollationQuery(0)).Scan(&pad, &weights.space); err != nil {
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
					if err := rowDB.QueryRowContext(ctx, o.WeightQuery(0, 1), v).Scan(&w); err != nil {
						t.Fatal(err)
					}
					weights.w[string(v.([]byte))] = w
				}
			}
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
		})
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

// A NULL part of a chunk-key bound is spelled IS NULL / IS NOT NULL (NULL sorts first), and a
// DECIMAL part is cast to its type (as text it would be compared as a double).
func TestRangePredicateWithNulls(t *testing.T) {
	ph, null := []string{"?", "CAST(? AS decimal(9,2))"}, []bool{true, true}
	got, args := afterKey([]string{"`a`", "`b`"}, ph, null, []any{nil, "1.5"})
	want := "((`a` IS NOT NULL) OR (`a` IS NULL AND `b` IS NOT NULL AND `b` > CAST(? AS decimal(9,2))))"
	if got != want || len(args) != 1 || args[0] != "1.5" {
		t.Fatalf("got %s %v, want %s [1.5]", got, args, want)
	}
	got, args = afterKey([]string{"`a`", "`b`"}, ph, null, []any{"x", "1.5"})
	want = "((`a` IS NOT NULL AND `a` > ?) OR (`a` <=> ? AND `b` IS NOT NULL AND `b` > CAST(? AS decimal(9,2))))"
	if got != want || len(args) != 3 {
		t.Fatalf("got %s %v, want %s [x x 1.5]", got, args, want)
	}
}
