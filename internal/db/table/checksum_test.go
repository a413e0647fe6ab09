package table

import (
	"context"
	"database/sql"
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// The checksum casts and flags only the columns that need it (checksumRow); each pair below
// differs in one value that a cheaper expression could confuse, and must checksum differently,
// while identical rows in a MyISAM source and an InnoDB target must checksum the same.
func TestChecksumTellsRowsApart(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE src (id INT NOT NULL PRIMARY KEY, "+
		"s VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, "+
		"l VARCHAR(10) CHARACTER SET latin1 NOT NULL DEFAULT '', n INT NULL, f DOUBLE NULL, d DATETIME(3) NULL, "+
		"b VARBINARY(10) NULL, e ENUM('x','y') NULL, m DECIMAL(10,4) NULL, k VARCHAR(10) CHARACTER SET cp1251 NULL) ENGINE=MyISAM",
		"CREATE TABLE dst LIKE src", "ALTER TABLE dst ENGINE=InnoDB")
	sum := checksums(t, db, schema)
	for _, c := range []struct {
		name       string
		cols       string
		src, dst   string
		wantEquals bool
	}{
		{"the same row", "s, l, n, f, d, b, e, m", "'a', 'é', 1, 0.1, '2020-01-01 00:00:00.001', x'00', 'x', 1.5",
			"'a', 'é', 1, 0.1, '2020-01-01 00:00:00.001', x'00', 'x', 1.5", true},
		{"NULL and the empty string", "s", "NULL", "''", false},
		{"case only", "s", "'a'", "'A'", false},
		{"a trailing space", "s", "'a'", "'a '", false},
		{"an accent equal in the collation", "l", "'é'", "'e'", false},
		{"NULL and zero", "n", "NULL", "0", false},
		{"a float's last digits", "f", "0.1", "0.1000001", false},
		{"milliseconds", "d", "'2020-01-01 00:00:00.001'", "'2020-01-01 00:00:00.002'", false},
		{"a trailing zero byte", "b", "x'00'", "x'0000'", false},
		{"an enum", "e", "'x'", "'y'", false},
		{"a decimal's scale", "m", "1.5", "1.5001", false},
		{"a value in the next column", "n, f", "NULL, 1", "1, NULL", false},
	} {
		sandboxtest.MustExec(t, db, "TRUNCATE src", "TRUNCATE dst",
			"INSERT INTO src (id, "+c.cols+") VALUES (1, "+c.src+")",
			"INSERT INTO dst (id, "+c.cols+") VALUES (1, "+c.dst+")")
		a, b := sum(false), sum(true)
		if (a == b) != c.wantEquals {
			t.Errorf("%s: source %v, target %v: equal %v, want %v", c.name, a, b, a == b, c.wantEquals)
		}
	}
}

// The same change to an even number of rows of one length must not cancel out: CRC32 is linear
// over XOR, so two rows whose strings differ in the same bits change their CRC32s by the same
// amount, and BIT_XOR over them hid every such pair (two counters bumped by one, two flags
// flipped). A trigger-capture rollback, which finds the writes since the cut-over by this
// checksum alone, lost 42 updates in a range that way.
func TestChecksumSeesTheSameChangeToTwoRows(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, pad CHAR(40) NOT NULL) ENGINE=MyISAM",
		"INSERT INTO src SELECT seq, 0, LPAD(HEX(seq * 2654435761), 40, 'x') FROM "+sandboxtest.Seq(2000),
		"CREATE TABLE dst LIKE src", "ALTER TABLE dst ENGINE=InnoDB", "INSERT INTO dst SELECT * FROM src")
	sum := checksums(t, db, schema)
	for _, change := range []string{
		"UPDATE src SET v = v + 1 WHERE id IN (1200, 1300)",
		"UPDATE src SET v = v + 1 WHERE id BETWEEN 1000 AND 1041",
		"UPDATE src SET pad = LOWER(pad) WHERE id IN (1500, 1600)",
	} {
		sandboxtest.MustExec(t, db, "UPDATE src SET v = 0, pad = LPAD(HEX(id * 2654435761), 40, 'x')", change)
		if a, b := sum(false), sum(true); a == b {
			t.Errorf("after %q the source and the target checksum the same (%v)", change, a)
		}
	}
}

// checksums returns the count and checksum of the whole of src (target false) or dst.
func checksums(t *testing.T, db *sql.DB, schema string) func(target bool) [2]int64 {
	t.Helper()
	info, err := Load(context.Background(), db, schema, "src")
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewSQL(info, "dst")
	if err != nil {
		t.Fatal(err)
	}
	return func(target bool) [2]int64 {
		var s [2]int64
		query, args := q.Checksum(Range{}, target)
		if err := db.QueryRow(query, args...).Scan(&s[0], &s[1]); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return s
	}
}
