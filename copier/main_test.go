package copier_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// pools are the copy's sessions, opened as the pipeline opens them.
type pools struct{ control, reader, writer *sql.DB }

func openPools(t *testing.T) pools {
	t.Helper()
	ctx := context.Background()
	conn := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	var p pools
	var err error
	if p.control, err = dbconn.Open(ctx, conn, "", 8); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.control.Close() })
	if p.reader, err = dbconn.OpenRowReader(ctx, conn, "", 2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.reader.Close() })
	if p.writer, err = dbconn.OpenRowWriter(ctx, conn, "", 6); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.writer.Close() })
	return p
}

// tablePair loads schema.src and builds the SQL that copies it into target (created by the test).
func tablePair(t *testing.T, db *sql.DB, schema, src, target string) *table.SQL {
	t.Helper()
	info, err := table.Load(context.Background(), db, schema, src)
	if err != nil {
		t.Fatal(err)
	}
	q, err := table.NewSQL(info, target)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
