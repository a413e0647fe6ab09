package rollback_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/expect"
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
func conn() dbconn.Config { return expect.RootConfig(srv) }

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

// snapshot lists the tables (with their engines) and triggers of schema, and the stages of the
// migrations recorded there, so that a test can show a refusal left everything as it found it.
func snapshot(t *testing.T, db *sql.DB, schema string) string {
	t.Helper()
	out := expect.Objects(t, db, schema)
	if states, err := state.NewStore(db, schema).List(context.Background(), "", ""); err == nil {
		for _, st := range states {
			out += ", " + st.Table + " " + st.Stage.String()
		}
	}
	return out
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
