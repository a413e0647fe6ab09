package migration

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// connConfig is the sandbox's root account as enginemig's connection settings.
func connConfig(s *sandbox.Server) dbconn.Config {
	return dbconn.Config{Host: "127.0.0.1", Port: s.Port, User: "root", SSLMode: dbconn.SSLDisabled}
}

func openControl(t *testing.T, s *sandbox.Server) *sql.DB {
	t.Helper()
	db, err := dbconn.Open(context.Background(), connConfig(s), "", 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// testOptions are apply's defaults, as `enginemig apply` runs with no flags (automatic pace,
// binlog capture where the server allows it, verification, copy workers) on a sandbox schema.
// A test that needs another setting changes it and says why.
func testOptions(s *sandbox.Server, schema, tbl string) Options {
	return Options{Conn: connConfig(s), Schema: schema, Table: tbl, StateSchema: "_enginemig_test",
		Logger: slog.New(slog.NewTextHandler(prefixed{os.Stderr, "    migration: "}, nil))}
}

func tableExists(t *testing.T, db *sql.DB, schema, name string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", schema, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func engineOf(t *testing.T, db *sql.DB, schema, name string) string {
	t.Helper()
	var e sql.NullString
	db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", schema, name).Scan(&e)
	return e.String
}

// sameRows compares two tables column by column with NULL-safe equality and returns a
// description of the first differences (empty when identical).
func sameRows(t *testing.T, db *sql.DB, schema, a, b string, cols []string, key string) string {
	t.Helper()
	var on []string
	for _, c := range cols {
		q := dbconn.QuoteIdent(c)
		on = append(on, "x."+q+" <=> y."+q)
	}
	qa, qb := dbconn.QualifiedName(schema, a), dbconn.QualifiedName(schema, b)
	var na, nb, matched int
	db.QueryRow("SELECT COUNT(*) FROM " + qa).Scan(&na)
	db.QueryRow("SELECT COUNT(*) FROM " + qb).Scan(&nb)
	if err := db.QueryRow("SELECT COUNT(*) FROM " + qa + " x JOIN " + qb + " y ON " + strings.Join(on, " AND ")).Scan(&matched); err != nil {
		t.Fatal(err)
	}
	if na == nb && nb == matched {
		return ""
	}
	k := dbconn.QuoteIdent(key)
	rows, err := db.Query("SELECT x." + k + " FROM " + qa + " x LEFT JOIN " + qb + " y ON " + strings.Join(on, " AND ") + " WHERE y." + k + " IS NULL LIMIT 5")
	var missing []string
	if err == nil {
		for rows.Next() {
			var id string
			rows.Scan(&id)
			missing = append(missing, id)
		}
		rows.Close()
	}
	return fmt.Sprintf("%s has %d rows, %s has %d, %d identical; rows of %s without an identical row in %s: %v",
		a, na, b, nb, matched, a, b, missing)
}

// dumpRow prints a row of both tables column by column, for failure messages.
func dumpRow(t *testing.T, db *sql.DB, schema, key string, id string, cols []string, tables ...string) string {
	var out []string
	for _, tbl := range tables {
		var exprs []string
		for _, c := range cols {
			exprs = append(exprs, "HEX("+dbconn.QuoteIdent(c)+")")
		}
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		db.QueryRow("SELECT "+strings.Join(exprs, ",")+" FROM "+dbconn.QualifiedName(schema, tbl)+" WHERE "+dbconn.QuoteIdent(key)+"=?", id).Scan(ptrs...)
		var parts []string
		for i, c := range cols {
			parts = append(parts, fmt.Sprintf("%s=%v", c, vals[i].String))
		}
		out = append(out, tbl+": "+strings.Join(parts, " "))
	}
	return strings.Join(out, "\n")
}

// purgeBinlogs rotates the binlog and purges every earlier file. A purge skips files a binlog
// reader still has open, and an earlier run's reader may take a moment to go, so it retries.
func purgeBinlogs(t *testing.T, db *sql.DB) {
	t.Helper()
	db.Exec("FLUSH BINARY LOGS")
	pos, err := binlog.CurrentPosition(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := db.Exec("PURGE BINARY LOGS TO '" + pos.Name + "'"); err != nil {
			t.Fatal(err)
		}
		files, _ := binlog.Available(context.Background(), db)
		if len(files) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("could not purge binlogs: %v", files)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// prefixed writes each log record to w behind a prefix.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) { return fmt.Fprint(p.w, p.prefix+string(b)) }

// logLines records log records (text format, one per entry) for tests that look for an event.
type logLines struct {
	mu    sync.Mutex
	lines []string
	each  func(line string)
}

func (l *logLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(b))
	each := l.each
	l.mu.Unlock()
	if each != nil {
		each(string(b))
	}
	return len(b), nil
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}

func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
