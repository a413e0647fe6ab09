package binlog

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Replay of a table without a key deletes or updates one row equal to the change's old image
// (table.SQL.DeleteOne, UpdateOne): of two rows that differ in one column only, the one the
// change was made to must be the one that changes, whatever the column's type. Each pair differs
// where an inexact comparison would not see it (a DECIMAL past a double's precision, the top bit
// of a BIT(64), a microsecond, case, a trailing space or zero byte), the other row of each pair
// comes first in the target (a LIMIT 1 that matched both would take it), and the second is
// deleted, or updated, on the source; replayed from the binlog, the target must hold what the
// source holds.
func TestKeylessReplayMatchesTheRowExactly(t *testing.T) {
	f, err := sandboxtest.Flavour()
	if err != nil {
		t.Fatal(err)
	}
	s := sandboxtest.ForFlavour(t, f, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var version string
	if err := db.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	const ddl = "CREATE TABLE %s (n INT NOT NULL, d DECIMAL(30,10) NULL, bits BIT(64) NULL, dbl DOUBLE NULL, f FLOAT NULL, " +
		"dt DATETIME(6) NULL, tm TIME(6) NULL, ts TIMESTAMP(6) NULL, vb VARBINARY(8) NULL, bn BINARY(4) NULL, " +
		"vc VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL, lat CHAR(4) CHARACTER SET latin1 NULL, " +
		"e ENUM('red','green','blue') NULL, st SET('x','y','z') NULL, KEY (n)) ENGINE=%s"
	pairs := []struct{ col, kept, changed string }{
		{"d", "12345678901234567890.0000000001", "12345678901234567890.0000000002"},
		{"d", "-0.0000000001", "0.0000000001"},
		{"bits", "1", "0x8000000000000001"},
		{"bits", "0x7FFFFFFFFFFFFFFF", "0xFFFFFFFFFFFFFFFF"},
		{"dbl", "0.1", "0.10000000000000002"},
		{"f", "0.1", "0.10000001"},
		{"dt", "'2020-01-01 00:00:00.000001'", "'2020-01-01 00:00:00.000002'"},
		{"tm", "'-838:59:58.999999'", "'-838:59:58.999998'"},
		{"ts", "'2020-01-01 00:00:00.000001'", "'2020-01-01 00:00:00.000002'"},
		{"vb", "'a'", "'a '"},
		{"vb", "'a'", "x'6100'"},
		{"bn", "x'61000000'", "x'61200000'"},
		{"vc", "'a'", "'A'"},
		{"vc", "'a'", "'a '"},
		{"lat", "'e'", "'é'"},
		{"e", "'red'", "'blue'"},
		{"st", "'x'", "'x,y'"},
	}
	sandboxtest.MustExec(t, db, fmt.Sprintf(ddl, "t", "MyISAM"), fmt.Sprintf(ddl, "t_new", "InnoDB"), "SET time_zone = '+00:00'")
	for i, p := range pairs {
		for _, v := range []string{p.kept, p.changed} {
			sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO t (n, %s) VALUES (%d, %s)", p.col, i, v))
		}
	}
	sandboxtest.MustExec(t, db, "INSERT INTO t_new SELECT * FROM t")
	start, err := CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// Each changed row is found on the source by its bytes (its number, for numbers); odd pairs
	// lose it, even ones move it.
	for i, p := range pairs {
		where := fmt.Sprintf("n = %d AND ", i)
		switch p.col {
		case "f":
			where += "f > 0.100000005" // 0.1 as a FLOAT is a little over 0.1
		case "bits", "dbl", "e", "st":
			where += p.col + " + 0 = " + strings.NewReplacer("'blue'", "3", "'x,y'", "3").Replace(p.changed)
		case "lat":
			where += "lat = _latin1 x'E9' COLLATE latin1_bin"
		default:
			where += "CAST(" + p.col + " AS BINARY) = CAST(" + p.changed + " AS BINARY)"
		}
		stmt := "DELETE FROM t WHERE " + where
		if i%2 == 0 {
			stmt = fmt.Sprintf("UPDATE t SET n = %d WHERE %s", 100+i, where)
		}
		res, err := db.Exec(stmt)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows on the source, the test needs one", stmt, n)
		}
	}
	end, err := CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	st := openTestStream(ctx, t, s, db, schema, version, start)
	info, err := table.Load(ctx, db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	q, err := table.NewSQL(info, "t_new")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Keyless() {
		t.Fatal("t has a key: the test is about tables without one")
	}
	writer, err := dbconn.OpenRowWriter(ctx, dbconn.Config{Host: "127.0.0.1", Port: s.Port, User: "root", SSLMode: dbconn.SSLDisabled}, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	a := NewApplier(writer, q)
	for st.Position().Compare(end) < 0 {
		it, err := st.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, commit, err := a.Write(ctx, it.Changes)
		if err != nil {
			t.Fatal(err)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
	}
	src, dst := hexRows(t, db, schema, "t"), hexRows(t, db, schema, "t_new")
	for _, r := range onlyIn(src, dst) {
		t.Errorf("only on the source: %s", r)
	}
	for _, r := range onlyIn(dst, src) {
		t.Errorf("only in the target: %s", r)
	}
}

// onlyIn is the rows of a (sorted) that b (sorted) lacks, counting copies.
func onlyIn(a, b []string) []string {
	var out []string
	for _, r := range a {
		if i, ok := slices.BinarySearch(b, r); ok {
			b = slices.Delete(slices.Clone(b), i, i+1)
		} else {
			out = append(out, r)
		}
	}
	return out
}

// hexRows reads every row of tbl as text that tells apart the values of each pair, sorted.
func hexRows(t *testing.T, db *sql.DB, schema, tbl string) []string {
	t.Helper()
	var cols []string
	for _, c := range []string{"n", "d", "HEX(bits)", "dbl", "f + 0e0", "dt", "tm", "ts", "HEX(vb)", "HEX(bn)", "HEX(vc)", "HEX(lat)", "e", "st"} {
		cols = append(cols, "COALESCE("+c+", '-')")
	}
	rows, err := db.Query("SELECT CONCAT_WS('|', " + strings.Join(cols, ", ") + ") FROM " + dbconn.QualifiedName(schema, tbl))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}
