package verify_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/shadow/verify"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// still is the Target of tables nothing writes to while they are verified: the target has
// always caught up, and no captured change is ever being written to it. (Verification beside
// real capture and writers is tested through the runner, in package migration.)
type still struct{}

func (still) WaitFor(ctx context.Context, _ *sql.Conn) error {
	return ctx.Err()
}
func (still) WaitUnlocked(ctx context.Context, _ *sql.Conn) error  { return ctx.Err() }
func (still) Exclusive(fn func() error) error                      { return fn() }
func (still) Hold(fn func() error) error                           { return fn() }
func (still) Mark(context.Context, *sql.Conn) (verify.Mark, error) { return verify.Mark{}, nil }

// marked is still with a capture that can stop at a mark (binlog capture's way): nothing writes,
// so the mark is reached at once.
type marked struct{ still }

func (marked) Mark(context.Context, *sql.Conn) (verify.Mark, error) {
	return verify.Mark{Reached: func(ctx context.Context) error { return ctx.Err() }, Lift: func() {}}, nil
}

// pair is a source table and its target in a fresh database, with the pools verification runs on.
type pair struct {
	schema          string
	control, writer *sql.DB
	q               *table.SQL
	capture         verify.Target // nil: still
	release         faults.Force  // forces verification's early release of the source, or none
}

func (p pair) source() string { return dbconn.QualifiedName(p.schema, "t") }
func (p pair) target() string { return dbconn.QualifiedName(p.schema, "_t_new") }

// newPair creates t from ddl (MyISAM) and seed, and _t_new as its InnoDB copy.
func newPair(t *testing.T, ddl string, seed ...string) pair {
	t.Helper()
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, sdb, append(append([]string{ddl}, seed...),
		"CREATE TABLE _t_new LIKE t", "ALTER TABLE _t_new ENGINE=InnoDB", "INSERT INTO _t_new SELECT * FROM t")...)
	ctx := context.Background()
	conn := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	p := pair{schema: schema}
	var err error
	if p.control, err = dbconn.Open(ctx, conn, "", 4); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.control.Close() })
	if p.writer, err = dbconn.OpenRowWriter(ctx, conn, "", 2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.writer.Close() })
	info, err := table.Load(ctx, p.control, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	if p.q, err = table.NewSQL(info, "_t_new"); err != nil {
		t.Fatal(err)
	}
	return p
}

// chunkRows is the size of every verification chunk in these tests: with lock-time targets far
// above what a chunk takes, the chunker grows them to its cap at once and keeps them there, so
// the chunk boundaries are known (every chunkRows-th key).
const chunkRows = 100

var fixedChunks = copier.Pace{ChunkTime: time.Minute, IdleChunkTime: time.Minute, RestRatio: -1,
	FirstChunk: chunkRows, MaxChunk: chunkRows}

// verifyPair runs verification of p with fixed chunks.
func verifyPair(t *testing.T, p pair, cfg verify.Config) (verify.Result, error) {
	t.Helper()
	var capture verify.Target = still{}
	if p.capture != nil {
		capture = p.capture
	}
	ctx := withHooks(context.Background(), faults.Hooks{VerifyRelease: p.release})
	return verify.Run(ctx, p.control, p.q, copier.NewChunker(p.writer, p.q, fixedChunks), capture, cfg)
}

func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
