package rollback_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/migration/state"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// quiet is the logger of runs whose log the test does not read.
var quiet = slog.New(slog.DiscardHandler)

// conn is the sandbox's root account as enginemig's connection settings.
func conn() dbconn.Config {
	return dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
}

// control is a pool opened as apply and rollback open theirs.
func control(t *testing.T) *sql.DB {
	t.Helper()
	db, err := dbconn.Open(context.Background(), conn(), "", 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// convert makes a fresh database whose table t (id, v; rows rows) apply converted with capture,
// its state kept in the database itself. It returns the database, a pool and the migration's id.
func convert(t *testing.T, capture string, rows int) (string, *sql.DB, int64) {
	t.Helper()
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(rows))
	db := control(t)
	res, err := migration.Run(context.Background(), db, migration.Options{Conn: conn(), Schema: schema, Table: "t",
		StateSchema: schema, Capture: capture, Logger: quiet})
	if err != nil {
		t.Fatalf("convert: %v", err)
	}
	return schema, db, res.ID
}

// run rolls schema.t back with the defaults and its state in schema.
func run(db *sql.DB, schema string) (*rollback.Result, error) {
	return rollback.Run(context.Background(), db, rollback.Options{Conn: conn(), Schema: schema, Table: "t", StateSchema: schema, Logger: quiet})
}

// mustRefuse fails the test unless err is an outcome error with code whose message says what and
// whose remedy says remedy: a refusal that does not say what is wrong and what to do is no help.
func mustRefuse(t *testing.T, err error, code outcome.Code, what, remedy string) {
	t.Helper()
	var oe *outcome.Error
	if !errors.As(err, &oe) {
		t.Fatalf("got %v, want a %s error saying %q", err, code.Name(), what)
	}
	if oe.Code != code || !strings.Contains(oe.Err.Error(), what) || !strings.Contains(oe.Remedy, remedy) {
		t.Fatalf("got %s %q (remedy %q), want %s saying %q with a remedy saying %q", oe.Code.Name(), oe.Err, oe.Remedy, code.Name(), what, remedy)
	}
}

// snapshot lists the tables (with their engines) and triggers of schema, and the stages of the
// migrations recorded there, so that a test can show a refusal left everything as it found it.
func snapshot(t *testing.T, db *sql.DB, schema string) string {
	t.Helper()
	rows, err := db.Query(`SELECT CONCAT(TABLE_NAME, ' ', COALESCE(ENGINE, TABLE_TYPE)) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?
		UNION ALL SELECT CONCAT('trigger ', TRIGGER_NAME) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?`, schema, schema)
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
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	if states, err := state.NewStore(db, schema).List(context.Background(), "", ""); err == nil {
		for _, st := range states {
			out = append(out, st.Table+" "+st.Stage.String())
		}
	}
	return strings.Join(out, ", ")
}

// contents is schema.name's rows, in key order.
func contents(t *testing.T, db *sql.DB, schema, name string) string {
	t.Helper()
	var s sql.NullString
	if err := db.QueryRow("SELECT GROUP_CONCAT(id, '=', COALESCE(v, 'NULL') ORDER BY id SEPARATOR ' ') FROM " + dbconn.QualifiedName(schema, name)).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s.String
}
