package planrun

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/expect"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/shadow"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// conn is the sandbox's root account as enginemig's connection settings.
func conn() dbconn.Config { return expect.RootConfig(srv) }

// quiet is the logger of runs whose log the test does not read.
var quiet = slog.New(slog.DiscardHandler)

// record writes a migration record of schema.tbl at stage (finished or not) in store, and returns
// it as written.
func record(t *testing.T, store *state.Store, schema, tbl string, stage state.Stage, finished bool) *state.State {
	t.Helper()
	st := &state.State{Schema: schema, Table: tbl, Stage: stage, Capture: shadow.Binlog}
	if err := store.Begin(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if finished {
		now := time.Now().UTC()
		st.FinishedAt = &now
		if err := store.Save(context.Background(), st); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// engine is schema.name's engine ("" when there is no such table).
func engine(t *testing.T, db *sql.DB, schema, name string) string {
	t.Helper()
	var e sql.NullString
	err := db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&e)
	if err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return e.String
}
