// Package expect holds the assertions tests of several packages share about what enginemig did to
// a server: a refusal that says what is wrong and what to do, and what a schema holds.
package expect

import (
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
)

// RootConfig is s's root account as enginemig's connection settings.
func RootConfig(s *sandbox.Server) dbconn.Config {
	return dbconn.Config{Host: "127.0.0.1", Port: s.Port, User: "root", SSLMode: dbconn.SSLDisabled}
}

// Refusal fails the test unless err is an outcome error with code whose message says what and
// whose remedy says remedy: a refusal that does not say what is wrong and what to do is no help.
func Refusal(t testing.TB, err error, code outcome.Code, what, remedy string) {
	t.Helper()
	var oe *outcome.Error
	if !errors.As(err, &oe) {
		t.Fatalf("got %v, want a %s error saying %q", err, code.Name(), what)
	}
	if oe.Code != code || !strings.Contains(oe.Err.Error(), what) || !strings.Contains(oe.Remedy, remedy) {
		t.Fatalf("got %s %q (remedy %q), want %s saying %q with a remedy saying %q", oe.Code.Name(), oe.Err, oe.Remedy, code.Name(), what, remedy)
	}
}

// Objects lists the tables (with their engines) and triggers of schema, sorted: what a test
// compares before and after to show what was dropped and kept, or that a refusal changed nothing.
func Objects(t testing.TB, db *sql.DB, schema string) string {
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
