package plan

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// srv is the package's shared server (binlog ROW/FULL, performance_schema on). Tests that need
// other server settings start their own. Tests here do not run in parallel: the read-only test
// compares server-wide state before and after.
var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

func inspect(t *testing.T, db *sql.DB, opts Options) *Plan {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Inspect(ctx, db, opts)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return p
}

func hasCheck(fs []Finding, id string) (Finding, bool) {
	for _, f := range fs {
		if f.Check == id {
			return f, true
		}
	}
	return Finding{}, false
}
