package migration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// When the binlog a resume needs has been purged, apply says so, starts the copy over and still
// produces a correct table.
func TestResumeRestartsCleanlyWhenBinlogPurged(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{})
	schema, sdb := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(50000),
		"CREATE TABLE ref LIKE t", "INSERT INTO ref SELECT * FROM t")
	db := openControl(t, s)
	opts := testOptions(s, schema, "t")
	hooks := faults.Hooks{IdleChunkTime: time.Millisecond}
	opts.ChunkTime = time.Millisecond
	opts.ProgressEvery, hooks.SaveEvery = 50*time.Millisecond, 50*time.Millisecond
	hooks.CrashAfterRows = 10000
	if _, err := Run(withHooks(context.Background(), hooks), db, opts); !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("want simulated crash, got %v", err)
	}
	sandboxtest.MustExec(t, sdb, "UPDATE t SET v = v + 1 WHERE id % 7 = 0", "UPDATE ref SET v = v + 1 WHERE id % 7 = 0")
	purgeBinlogs(t, db)
	var logs logLines
	hooks.CrashAfterRows = 0
	opts.Logger = logs.logger()
	res, err := Run(withHooks(context.Background(), hooks), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "interrupted migration") || res.RowsCopied < 50000 {
		t.Fatalf("expected a clean restart of the copy; copied %d; log %v", res.RowsCopied, logs.String())
	}
	if diff := sameRows(t, db, schema, "t", "ref", []string{"id", "v"}, "id"); diff != "" {
		t.Fatal(diff)
	}
}

// A server limit hit during the copy surfaces as a clear error, exit code 6, and the original
// table is untouched.
func TestServerLimitDuringCopyFailsCleanly(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{ExtraArgs: []string{"--max-binlog-cache-size=65536", "--max-binlog-stmt-cache-size=65536"}})
	schema, sdb := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v CHAR(200)) ENGINE=MyISAM")
	for lo := 0; lo < 20000; lo += 100 { // small statements: the limit applies to seeding too
		sandboxtest.MustExec(t, sdb, fmt.Sprintf("INSERT INTO t SELECT seq, REPEAT('x', 200) FROM seq_%d_to_%d", lo+1, lo+100))
	}
	db := openControl(t, s)
	_, err := Run(context.Background(), db, testOptions(s, schema, "t"))
	if outcome.CodeOf(err) != outcome.FailedSafe || !strings.Contains(err.Error(), "max_binlog") {
		t.Fatalf("got %d %v", outcome.CodeOf(err), err)
	}
	if tableExists(t, db, schema, "_t_new") || engineOf(t, db, schema, "t") != "MyISAM" {
		t.Fatal("a failed copy left changes")
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM `" + schema + "`.t").Scan(&n)
	if n != 20000 {
		t.Fatalf("original has %d rows", n)
	}
}

// A chunk that fails beside another reports its own error: the copy's other work stops with a
// canceled context, which is only the echo of that failure.
func TestParallelChunkFailureIsReported(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{ExtraArgs: []string{"--max-binlog-cache-size=65536", "--max-binlog-stmt-cache-size=65536"}})
	schema, sdb := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v CHAR(200)) ENGINE=MyISAM")
	for lo := 0; lo < 20000; lo += 100 {
		sandboxtest.MustExec(t, sdb, fmt.Sprintf("INSERT INTO t SELECT seq, REPEAT('x', 200) FROM seq_%d_to_%d", lo+1, lo+100))
	}
	db := openControl(t, s)
	opts := testOptions(s, schema, "t")
	opts.CopyWorkers = 2
	_, err := Run(withHooks(context.Background(), faults.Hooks{CopyAlwaysParallel: true}), db, opts)
	if err == nil || !strings.Contains(err.Error(), "max_binlog") || strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("want the chunk's own error, got %v", err)
	}
}
