package cleanup_test

import (
	"database/sql"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// conn is the sandbox's root account as enginemig's connection settings (cleanup takes the
// table's advisory lock on a connection of its own).
func conn() dbconn.Config {
	return dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
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

// objects lists the tables (with their engines) and triggers of schema, so that a test can show
// what cleanup dropped and kept, and that a refusal left everything as it found it.
func objects(t *testing.T, db *sql.DB, schema string) string {
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
	return strings.Join(out, ", ")
}

// count is the number of rows in schema.name.
func count(t *testing.T, db *sql.DB, schema, name string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + dbconn.QualifiedName(schema, name)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
