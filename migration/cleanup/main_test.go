package cleanup_test

import (
	"database/sql"
	"os"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/expect"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// conn is the sandbox's root account as enginemig's connection settings (cleanup takes the
// table's advisory lock on a connection of its own).
func conn() dbconn.Config { return expect.RootConfig(srv) }

// count is the number of rows in schema.name.
func count(t *testing.T, db *sql.DB, schema, name string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + dbconn.QualifiedName(schema, name)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
