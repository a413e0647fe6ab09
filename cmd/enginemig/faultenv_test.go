package main

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/ackload"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// faultEnv is one sandbox server, the enginemig binary, and an application account ("app")
// distinct from the tool's ("root"), so the tool's connections can be told apart in the
// processlist.
type faultEnv struct {
	srv  *sandbox.Server
	bin  string
	app  *sql.DB // the application and the test's own queries, as user app
	conn []string
}

var shared struct {
	sync.Mutex
	env *faultEnv
}

// TestMain stops the fault tests' shared server and removes the built binary.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil {
		shared.env.app.Close()
		shared.env.srv.Stop()
	}
	if buildOnce.path != "" {
		os.RemoveAll(filepath.Dir(buildOnce.path))
	}
	os.Exit(code)
}

// faultServer returns the server the fault tests share (started on first use; the tests run one
// after the other, and each works in its own database).
func faultServer(t *testing.T) *faultEnv {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.env != nil {
		return shared.env
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sandbox.Start(ctx, sandbox.Options{})
	if err != nil {
		t.Fatalf("start sandbox server: %v", err)
	}
	e, err := setupFaultEnv(s)
	if err != nil {
		s.Stop()
		t.Fatal(err)
	}
	e.bin = buildBinary(t)
	shared.env = e
	return e
}

func setupFaultEnv(s *sandbox.Server) (*faultEnv, error) {
	e := &faultEnv{srv: s}
	root, err := s.Open("")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, q := range []string{"CREATE USER 'app'@'127.0.0.1'", "GRANT ALL ON *.* TO 'app'@'127.0.0.1'"} {
		if _, err := root.Exec(q); err != nil {
			return nil, err
		}
	}
	if e.app, err = openAs(s, "app"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "emfault-")
	if err != nil {
		return nil, err
	}
	empty := filepath.Join(dir, "my.cnf")
	os.WriteFile(empty, nil, 0o600)
	e.conn = []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(s.Port), "--user", "root", "--ssl-mode", "DISABLED"}
	return e, nil
}

func openAs(s *sandbox.Server, user string) (*sql.DB, error) {
	c := s.Config("")
	c.User = user
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	return db, nil
}

// database creates a fresh database, dropped when the test ends.
func (e *faultEnv) database(t *testing.T, name string) string {
	t.Helper()
	sandboxtest.MustExec(t, e.app, "DROP DATABASE IF EXISTS "+dbconn.QuoteIdent(name), "CREATE DATABASE "+dbconn.QuoteIdent(name))
	t.Cleanup(func() { e.app.Exec("DROP DATABASE IF EXISTS " + dbconn.QuoteIdent(name)) })
	return name
}

var buildOnce struct {
	sync.Mutex
	path string
}

// buildBinary builds the enginemig binary once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Lock()
	defer buildOnce.Unlock()
	if buildOnce.path != "" {
		return buildOnce.path
	}
	dir, err := os.MkdirTemp("", "enginemig-bin-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "enginemig")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	buildOnce.path = bin
	return bin
}

// proc is a running enginemig.
type proc struct {
	cmd  *exec.Cmd
	out  *sandboxtest.SyncBuffer
	done chan struct{}
	code int
}

func (e *faultEnv) start(t *testing.T, args ...string) *proc {
	t.Helper()
	full := append([]string{args[0]}, e.conn...)
	full = append(full, args[1:]...)
	p := &proc{cmd: exec.Command(e.bin, full...), out: &sandboxtest.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.code = exitCode(p.cmd.Wait()); close(p.done) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

// wait returns the exit code and output, failing the test after limit.
func (p *proc) wait(t *testing.T, limit time.Duration) (int, string) {
	t.Helper()
	select {
	case <-p.done:
		return p.code, p.out.String()
	case <-time.After(limit):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("enginemig did not finish within %s:\n%s", limit, p.out.String())
		return 0, ""
	}
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// run runs enginemig to the end.
func (e *faultEnv) run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	return e.start(t, args...).wait(t, 3*time.Minute)
}

// stage returns the stage and rows copied of the newest state record of schema.table ("" before
// the state table exists).
func (e *faultEnv) stage(schema, table string) (string, int64) {
	var stage string
	var rows int64
	e.app.QueryRow("SELECT stage, rows_copied FROM _enginemig.migrations WHERE schema_name=? AND table_name=? ORDER BY id DESC LIMIT 1",
		schema, table).Scan(&stage, &rows)
	return stage, rows
}

// waitStage polls the state table until ok(stage) or p exits; it returns the stage seen.
func (e *faultEnv) waitStage(t *testing.T, p *proc, schema, table string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, _ := e.stage(schema, table)
		if ok(st) {
			return st
		}
		if !p.running() {
			t.Fatalf("enginemig exited %d before the awaited stage (last seen %q):\n%s", p.code, st, p.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("stage not reached")
	return ""
}

func (e *faultEnv) engine(schema, table string) string {
	var engine sql.NullString
	e.app.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", schema, table).Scan(&engine)
	return engine.String
}

// checkLoad stops nothing: call it after stop. It fails the test on any lost or stale write and
// on application errors unless allowErrors.
func checkLoad(t *testing.T, db *sql.DB, l *ackload.Load, schema, table string, allowErrors bool) {
	t.Helper()
	st := l.Stats()
	if st.Stale > 0 || (!allowErrors && st.Errors > 0) {
		t.Errorf("application saw %d errors and %d stale reads: %s", st.Errors, st.Stale, strings.Join(l.Problems(5), "; "))
	}
	checked, diffs, err := l.Check(context.Background(), db, schema, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("%s.%s does not hold the acknowledged writes:\n%s", schema, table, strings.Join(diffs, "\n"))
	}
	if st.Acked < 50 {
		t.Fatalf("only %d writes acknowledged: the load did not overlap the migration", st.Acked)
	}
	t.Logf("load: %d acknowledged writes, %d checked reads, %d errors (%d ids uncertain); %d rows identical to the acknowledged state",
		st.Acked, st.Reads, st.Errors, st.Uncertain, checked)
}
