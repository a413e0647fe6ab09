package main

import (
	"context"
	"crypto/md5"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// tableShape is one row of the shape matrix: a MyISAM table's definition (its columns after n, v
// and the common payload) and how its key follows from a row's N.
type tableShape struct {
	name    string
	columns string // extra column and index definitions, each with a leading comma
	options string // after ENGINE=MyISAM
	shape   ackload.Shape
	// mariaDBOnly: MySQL 8.0 and later have no partitioned MyISAM tables.
	mariaDBOnly bool
	// everyFlavour: the shape touches SQL or row images that differ between servers (a composite
	// key under a collation, a case-insensitive key, a keyless table, the swap of triggers,
	// generated columns), so it runs on 11.8 and 9.7 too. The ENUM/DATETIME, BINARY and DECIMAL
	// keys run on 10.11 only: TestKeyOrderFollowsTheServer checks those types' order and range
	// predicates on each server and TestKeylessReplayMatchesTheRowExactly their row images, and
	// the three took 50 s of CI's MySQL 9.7 leg.
	everyFlavour bool
	// refusedOnMySQL names the plan check that refuses the shape on MySQL 9.7 (its
	// enforce_gtid_consistency): apply must exit 4 with it and change nothing.
	refusedOnMySQL string
	// setup runs after the table and its twin exist (triggers), with %[1]s the table, %[2]s the twin.
	setup []string
}

// commonPayload: utf8mb4 text with characters outside the BMP, latin1 text, and a BLOB with
// zero bytes, on every shape.
var commonPayload = []string{"s", "l", "b"}

const commonColumns = "s VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, " +
	"l VARCHAR(32) CHARACTER SET latin1, b BLOB"

func payloadOf(n, v int64) []any {
	b := md5.Sum([]byte(fmt.Sprint(n, v)))
	return []any{fmt.Sprintf("Grüße 🐎 %d/%d", n, v), fmt.Sprintf("café ñ %d", v), append([]byte{0, 255}, b[:]...)}
}

var datetimeBase = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// mixedCase gives keys whose case-insensitive order differs from their byte order ("B…" sorts
// after "a…" in the collation, before it in bytes).
func mixedCase(n int64) string { return fmt.Sprintf("%s%07d", []string{"a", "B", "c"}[n%3], n) }

func shapeMatrix() []tableShape {
	withPayload := func(s ackload.Shape) ackload.Shape {
		s.Payload = append(s.Payload, commonPayload...)
		inner := s.PayloadOf
		s.PayloadOf = func(n, v int64) []any {
			var vals []any
			if inner != nil {
				vals = inner(n, v)
			}
			return append(vals, payloadOf(n, v)...)
		}
		return s
	}
	return []tableShape{
		{name: "int_varchar_ci", everyFlavour: true,
			columns: ", a INT NOT NULL, k VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL, PRIMARY KEY (a, k)",
			shape:   withPayload(ackload.Shape{Key: []string{"a", "k"}, KeyOf: func(n int64) []any { return []any{n / 7, mixedCase(n)} }})},
		{name: "enum_datetime_int",
			columns: ", e ENUM('red','green','blue') NOT NULL, d DATETIME(6) NOT NULL, i INT NOT NULL, PRIMARY KEY (e, d, i)",
			shape: withPayload(ackload.Shape{Key: []string{"e", "d", "i"}, KeyOf: func(n int64) []any {
				d := datetimeBase.Add(time.Duration(n%5000) * 1234567 * time.Microsecond)
				return []any{[]string{"red", "green", "blue"}[n%3], d.Format("2006-01-02 15:04:05.000000"), n}
			}})},
		{name: "varchar_ci", everyFlavour: true,
			columns: ", k VARCHAR(40) COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY",
			shape:   withPayload(ackload.Shape{Key: []string{"k"}, KeyOf: func(n int64) []any { return []any{mixedCase(n)} }})},
		{name: "binary16",
			columns: ", k BINARY(16) NOT NULL PRIMARY KEY",
			shape: withPayload(ackload.Shape{Key: []string{"k"}, KeyOf: func(n int64) []any {
				h := md5.Sum([]byte(strconv.FormatInt(n, 10)))
				return []any{h[:]}
			}})},
		{name: "decimal",
			columns: ", k DECIMAL(20,4) NOT NULL PRIMARY KEY",
			shape: withPayload(ackload.Shape{Key: []string{"k"}, KeyOf: func(n int64) []any {
				return []any{fmt.Sprintf("-%d.%04d", n/3, (n*37)%10000)}
			}})},
		{name: "keyless_indexed", everyFlavour: true, columns: ", KEY (n)", shape: withPayload(ackload.Shape{})},
		{name: "keyless_no_index", shape: withPayload(ackload.Shape{})},
		{name: "fulltext", columns: ", id BIGINT NOT NULL PRIMARY KEY, body TEXT, FULLTEXT KEY (body)",
			shape: withPayload(ackload.Shape{Key: []string{"id"}, KeyOf: func(n int64) []any { return []any{n} },
				Payload: []string{"body"}, PayloadOf: func(n, v int64) []any { return []any{fmt.Sprintf("horse number %d saddle %d", n, v)} }})},
		{name: "triggers", everyFlavour: true, refusedOnMySQL: "trigger-other-engine", columns: ", id BIGINT NOT NULL PRIMARY KEY",
			shape: withPayload(ackload.Shape{Key: []string{"id"}, KeyOf: func(n int64) []any { return []any{n} }}),
			setup: []string{
				"CREATE TABLE %[1]s_audit (op CHAR(1), n BIGINT, v INT) ENGINE=MyISAM",
				"CREATE TABLE %[2]s_audit (op CHAR(1), n BIGINT, v INT) ENGINE=MyISAM",
				"CREATE TRIGGER %[1]s_ai AFTER INSERT ON %[1]s FOR EACH ROW INSERT INTO %[1]s_audit VALUES ('i', NEW.n, NEW.v)",
				"CREATE TRIGGER %[1]s_au AFTER UPDATE ON %[1]s FOR EACH ROW INSERT INTO %[1]s_audit VALUES ('u', NEW.n, NEW.v)",
				"CREATE TRIGGER %[1]s_ad BEFORE DELETE ON %[1]s FOR EACH ROW INSERT INTO %[1]s_audit VALUES ('d', OLD.n, OLD.v)",
				"CREATE TRIGGER %[2]s_ai AFTER INSERT ON %[2]s FOR EACH ROW INSERT INTO %[2]s_audit VALUES ('i', NEW.n, NEW.v)",
				"CREATE TRIGGER %[2]s_au AFTER UPDATE ON %[2]s FOR EACH ROW INSERT INTO %[2]s_audit VALUES ('u', NEW.n, NEW.v)",
				"CREATE TRIGGER %[2]s_ad BEFORE DELETE ON %[2]s FOR EACH ROW INSERT INTO %[2]s_audit VALUES ('d', OLD.n, OLD.v)",
			}},
		{name: "partitioned", mariaDBOnly: true, columns: ", id BIGINT NOT NULL PRIMARY KEY", options: " PARTITION BY KEY (id) PARTITIONS 4",
			shape: withPayload(ackload.Shape{Key: []string{"id"}, KeyOf: func(n int64) []any { return []any{n} }})},
		{name: "generated", everyFlavour: true, columns: ", id BIGINT NOT NULL PRIMARY KEY, g BIGINT AS (v * 2 + n) VIRTUAL, gs VARCHAR(80) AS (CONCAT(l, '/', v)) STORED",
			shape: withPayload(ackload.Shape{Key: []string{"id"}, KeyOf: func(n int64) []any { return []any{n} },
				Compare: []string{"id", "n", "v", "g", "gs", "s", "l", "b"}})},
	}
}

// TestTableShapesConvertWithDefaults converts one table of each shape with `enginemig apply` given
// no setting but where the table is, while three writers at an application's pace insert, update,
// delete and re-key their own rows, each write mirrored to a twin table once acknowledged. No
// writer may see an error or a stale read, the converted table must hold the twin's rows exactly
// (a multiset: keyless rows may be duplicates), and the shape's triggers must have fired as the
// twin's did. ENGINEMIG_TEST_FLAVOUR other than 10.11 runs the shapes marked everyFlavour.
func TestTableShapesConvertWithDefaults(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	empty := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sh := range shapeMatrix() {
		t.Run(sh.name, func(t *testing.T) {
			if sh.mariaDBOnly && srv.Flavour().MySQL() {
				t.Skipf("%s has no partitioned MyISAM tables", srv.Flavour())
			}
			if !sh.everyFlavour && srv.Flavour() != sandbox.MariaDB1011 {
				t.Skipf("no %s-specific SQL: runs on %s", srv.Flavour(), sandbox.MariaDB1011)
			}
			convertShape(t, srv, empty, sh)
		})
	}
}

func convertShape(t *testing.T, srv *sandbox.Server, defaultsFile string, sh tableShape) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	for _, tbl := range []string{"t", "twin"} {
		sandboxtest.MustExec(t, db, "CREATE TABLE "+tbl+" (n BIGINT NOT NULL, v INT NOT NULL, "+commonColumns+sh.columns+") ENGINE=MyISAM"+sh.options)
	}
	for _, q := range sh.setup {
		sandboxtest.MustExec(t, db, fmt.Sprintf(q, "t", "twin"))
	}
	if sh.refusedOnMySQL != "" && srv.Flavour().MySQL() {
		// Triggers writing a MyISAM table from an InnoDB one fail every write with error 1785 under
		// enforce_gtid_consistency: plan refuses the table instead of converting it into that.
		var out sandboxtest.SyncBuffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &out
		err := app.RunContext(context.Background(), []string{"enginemig", "apply", "--defaults-file", defaultsFile, "--host", "127.0.0.1",
			"--port", strconv.Itoa(srv.Port), "--user", "root", "--ssl-mode", "DISABLED", "--database", schema, "--table", "t", "--no-progress"})
		var engine string
		db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't'").Scan(&engine)
		if outcome.CodeOf(err) != outcome.Refused || err == nil || !strings.Contains(err.Error(), "["+sh.refusedOnMySQL+"]") || engine != "MyISAM" {
			t.Fatalf("on %s apply should refuse with [%s] and leave t MyISAM: %v, t %s\n%s", srv.Flavour(), sh.refusedOnMySQL, err, engine, out.String())
		}
		return
	}
	app, err := srv.Open(schema)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.SetMaxOpenConns(8)
	l, err := ackload.NewTwinLoad(context.Background(), app, schema, "t", "twin", sh.shape, ackload.TwinConfig{Seed: uint64(time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	stop := l.Start()
	defer stop()
	time.Sleep(300 * time.Millisecond) // the application runs before apply measures it
	ackedBefore := l.Acked()
	out, code := runCLIStreamed(t, "apply", "--defaults-file", defaultsFile, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port),
		"--user", "root", "--ssl-mode", "DISABLED", "--database", schema, "--table", "t", "--no-progress")
	if code != outcome.OK {
		stop()
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	during := l.Acked() - ackedBefore
	time.Sleep(300 * time.Millisecond) // writes the InnoDB table alone receives
	stop()
	if p := l.Problems(); len(p) > 0 {
		t.Errorf("the application saw %d problem(s) during apply, the first: %s", len(p), strings.Join(p[:min(5, len(p))], "; "))
	}
	var engine string
	db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't'").Scan(&engine)
	if engine != "InnoDB" {
		t.Fatalf("t is %q after apply", engine)
	}
	rows, diffs, err := l.Differences(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("t does not hold the acknowledged writes its twin holds:\n%s", strings.Join(diffs, "\n"))
	}
	if len(sh.setup) > 0 {
		var a, b int
		var sa, sb string
		db.QueryRow("SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS(',', op, n, v))), 0) FROM t_audit").Scan(&a, &sa)
		db.QueryRow("SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS(',', op, n, v))), 0) FROM twin_audit").Scan(&b, &sb)
		if a != b || sa != sb || a == 0 {
			t.Errorf("t's triggers wrote %d audit rows (sum %s), the twin's %d (sum %s)", a, sa, b, sb)
		}
	}
	// The writers must have overlapped the conversion, or nothing was tested under writes.
	if during == 0 {
		t.Fatalf("no write acknowledged while apply ran (%d in all): the load did not overlap apply", l.Acked())
	}
	t.Logf("%s: %d rows equal to the twin's, %d acknowledged writes (%d while apply ran), %d checked reads", sh.name, rows, l.Acked(), during, l.Reads())
}

// runCLIStreamed is runCLI that also writes the command's output to the test's stderr as it comes
// when the test runs verbose: an apply that hangs shows where.
func runCLIStreamed(t *testing.T, args ...string) (string, outcome.Code) {
	t.Helper()
	if !testing.Verbose() {
		return runCLI(t, args...)
	}
	var out sandboxtest.SyncBuffer
	app := newApp()
	w := io.MultiWriter(&out, os.Stderr)
	app.Writer, app.ErrWriter = w, w
	err := app.RunContext(context.Background(), append([]string{"enginemig"}, args...))
	if err != nil {
		t.Logf("enginemig %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), outcome.CodeOf(err)
}
