// Package sandboxtest holds the sandbox helpers that take a *testing.T: servers and databases
// that live as long as one test, and a TestMain body. It is a package of its own so that
// importing sandbox (as the demo does) does not link package testing into the binary; only
// _test.go files may import it.
package sandboxtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
)

// startTimeout bounds a test's wait for its server. Generous: CI runs several test binaries at
// once on few cores.
const startTimeout = 2 * time.Minute

// ForTest starts a server for one test and stops it when the test ends. A test that needs a
// server fails (never skips) when MariaDB is missing: CI installs it, and a silent skip would hide
// that nothing was tested.
func ForTest(tb testing.TB, opts sandbox.Options) *sandbox.Server {
	tb.Helper()
	if opts.Flavour == "" {
		f, err := Flavour()
		if err != nil {
			tb.Fatal(err)
		}
		opts.Flavour = f
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := sandbox.Start(ctx, opts)
	if err != nil {
		tb.Fatalf("start sandbox server: %v", err)
	}
	tb.Cleanup(func() { s.Stop() })
	return s
}

// ReplicaForTest starts a replica of primary for one test and stops it when the test ends.
func ReplicaForTest(tb testing.TB, primary *sandbox.Server, opts sandbox.Options) *sandbox.Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	r, err := sandbox.StartReplica(ctx, primary, opts)
	if err != nil {
		tb.Fatalf("start sandbox replica: %v", err)
	}
	tb.Cleanup(func() { r.Stop() })
	return r
}

// Main is a TestMain body for packages whose tests share one server: it starts the server, hands
// it to set, runs the tests and stops it. It returns the exit code for os.Exit.
func Main(m *testing.M, opts sandbox.Options, set func(*sandbox.Server)) int {
	if opts.Flavour == "" {
		f, err := Flavour()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts.Flavour = f
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	s, err := sandbox.Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start sandbox server (%s): %v\n", opts.Flavour, err)
		return 1
	}
	set(s)
	defer s.Stop()
	return m.Run()
}

var dbCounter atomic.Int64

// FreshDatabase creates an empty database on s with a unique name, dropped when the test ends,
// so tests can share one server without seeing each other's tables.
func FreshDatabase(tb testing.TB, s *sandbox.Server) (name string, db *sql.DB) {
	tb.Helper()
	// Read again while a test runs: the go command keys its test cache only on the environment
	// a test reads, and Main reads FlavourEnv before the tests start, where that is not seen (a
	// run on another flavour was once answered from the cache).
	_ = os.Getenv(FlavourEnv)
	name = fmt.Sprintf("t%d_%s", dbCounter.Add(1), sanitize(tb.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	root, err := s.Open("")
	if err != nil {
		tb.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE `" + name + "`"); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	db, err = s.Open(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		db.Close()
		dropDatabase(s, name)
	})
	return name, db
}

// dropDatabase drops name at a test's end. A session the test left holding one of its tables (a
// LOCK TABLES of a test that failed before releasing it) would keep the DROP waiting until go
// test's timeout, hiding the failure behind a hang: the DROP waits 30 s at most, and then the
// sessions still open on the server (the test is over) are killed and the DROP sent again.
func dropDatabase(s *sandbox.Server, name string) {
	r, err := s.Open("")
	if err != nil {
		return
	}
	defer r.Close()
	r.SetMaxOpenConns(1)
	drop := "DROP DATABASE IF EXISTS `" + name + "`"
	if _, err := r.Exec("SET SESSION lock_wait_timeout = 30"); err != nil {
		return
	}
	if _, err := r.Exec(drop); err == nil {
		return
	}
	rows, err := r.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Daemon', 'Binlog Dump', 'Binlog Dump GTID') AND USER NOT IN ('system user', 'event_scheduler')")
	if err != nil {
		return
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		r.Exec(fmt.Sprintf("KILL %d", id))
	}
	r.Exec(drop)
}

// sanitize makes a test name usable in a database name.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// MustExec runs statements on db and fails the test on the first error.
func MustExec(tb testing.TB, db *sql.DB, stmts ...string) {
	tb.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// Tmpfs mounts a tmpfs of size bytes for one test and unmounts it when the test ends. It skips
// the test, saying why, where mounting is not allowed (not root, or a container without
// CAP_SYS_ADMIN): the caller's claim needs a small file system of its own.
func Tmpfs(tb testing.TB, size int64) string {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skipf("a tmpfs needs Linux (this is %s): the test needs a small file system of its own", runtime.GOOS)
	}
	dir := tb.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		tb.Skipf("cannot mount a tmpfs (run the test as root, in a container with CAP_SYS_ADMIN): %v: %s", err, strings.TrimSpace(string(out)))
	}
	// Cleanups run last-added first: the server stops before this, the directory goes after.
	tb.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			tb.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
