// Package sandbox starts private, throwaway MariaDB servers (own datadir, free port, the binlog
// settings enginemig needs) for tests and for the demo, and stops them again. The demo ships in
// the binary, so this package must not import testing: helpers that take a *testing.T live in
// sandboxtest.
package sandbox

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// startTimeout bounds how long a fresh server may take to accept connections. Observed: under a
// second on an idle 2-core machine; generous because CI runs several test binaries at once.
const startTimeout = 60 * time.Second

// Options choose how a sandbox server is configured. The zero value gives what enginemig needs:
// binlog ROW with FULL row image and FULL row metadata, performance_schema on.
type Options struct {
	// BinlogFormat is ROW (default), STATEMENT, MIXED, or OFF to start without a binlog.
	BinlogFormat string
	// RowImage is FULL (default), MINIMAL or NOBLOB.
	RowImage string
	// ServerID defaults to 1.
	ServerID int
	// BufferPool is innodb_buffer_pool_size, default 256M.
	BufferPool string
	// ExtraArgs are appended to the mariadbd command line (e.g. "--key-buffer-size=64M").
	ExtraArgs []string
	// Dir, when set, is where the server lives; otherwise a temporary directory that Stop removes.
	Dir string
	// Keep leaves the directory in place on Stop (for the demo's --keep).
	Keep bool
}

// Server is one running mariadbd.
type Server struct {
	Dir    string
	Socket string
	Port   int
	opts   Options
	cmd    *exec.Cmd
	exited chan struct{}
	ownDir bool
}

// Available reports whether the MariaDB server binaries are installed, with the fix when not.
func Available() error {
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := lookPath(bin); err != nil {
			return fmt.Errorf("%s not found: install the MariaDB server (Debian/Ubuntu: apt-get install -y mariadb-server)", bin)
		}
	}
	return nil
}

// lookPath also searches /usr/sbin, which is not on every user's PATH but is where Debian puts mariadbd.
func lookPath(bin string) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"} {
		p := filepath.Join(dir, bin)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

var pristineMu sync.Mutex

// pristineDatadir returns a freshly initialised datadir shared by all sandboxes on this machine.
// Copying it (a few tens of MB) is much faster than running mariadb-install-db for every server.
// A file lock makes concurrent test binaries (go test ./... runs packages in parallel) build it once.
func pristineDatadir(ctx context.Context) (string, error) {
	pristineMu.Lock()
	defer pristineMu.Unlock()
	mariadbd, err := lookPath("mariadbd")
	if err != nil {
		return "", Available()
	}
	st, err := os.Stat(mariadbd)
	if err != nil {
		return "", err
	}
	base := filepath.Join(os.TempDir(), fmt.Sprintf("enginemig-pristine-%d-%d", st.Size(), st.ModTime().Unix()))
	if _, err := os.Stat(filepath.Join(base, "ready")); err == nil {
		return filepath.Join(base, "data"), nil
	}
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return "", err
	}
	lockFile, err := os.OpenFile(base+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("sandbox: lock pristine datadir: %w", err)
	}
	defer lockFile.Close()
	if err := syscall.Flock(int(lockFile.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("sandbox: lock pristine datadir: %w", err)
	}
	defer syscall.Flock(int(lockFile.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(base, "ready")); err == nil {
		return filepath.Join(base, "data"), nil
	}
	os.RemoveAll(base)
	installDB, err := lookPath("mariadb-install-db")
	if err != nil {
		return "", Available()
	}
	data := filepath.Join(base, "data")
	cmd := exec.CommandContext(ctx, installDB, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--innodb-log-file-size=48M", "--skip-test-db")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("sandbox: mariadb-install-db: %w\n%s", err, lastLines(string(out), 20))
	}
	if err := os.WriteFile(filepath.Join(base, "ready"), nil, 0o644); err != nil {
		return "", err
	}
	return data, nil
}

// Start creates a datadir and starts mariadbd on a free loopback port, waiting until it answers.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	pristine, err := pristineDatadir(ctx)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, Dir: opts.Dir}
	if s.Dir == "" {
		// Short path: the unix socket path must stay under 108 bytes.
		s.Dir, err = os.MkdirTemp("", "emsb-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		s.ownDir = true
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", pristine, filepath.Join(s.Dir, "data")).CombinedOutput(); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("sandbox: copy datadir: %w: %s", err, out)
	}
	s.Socket = filepath.Join(s.Dir, "mysql.sock")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
		if lastErr = s.launch(ctx); lastErr == nil {
			return s, nil
		}
	}
	s.removeDir()
	return nil, lastErr
}

func (s *Server) args() []string {
	o := s.opts
	id := o.ServerID
	if id == 0 {
		id = 1
	}
	bp := o.BufferPool
	if bp == "" {
		bp = "256M"
	}
	args := []string{
		"--no-defaults",
		"--datadir=" + filepath.Join(s.Dir, "data"),
		"--socket=" + s.Socket,
		"--port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1",
		"--user=root",
		"--pid-file=" + filepath.Join(s.Dir, "mariadbd.pid"),
		"--log-error=" + filepath.Join(s.Dir, "error.log"),
		"--tmpdir=" + s.Dir,
		"--server-id=" + strconv.Itoa(id),
		"--performance-schema=ON",
		"--innodb-buffer-pool-size=" + bp,
		"--innodb-log-file-size=48M",
		"--skip-name-resolve",
		"--max-connections=500",
		"--log-basename=mysql",
	}
	format := strings.ToUpper(o.BinlogFormat)
	if format == "" {
		format = "ROW"
	}
	if format != "OFF" {
		image := o.RowImage
		if image == "" {
			image = "FULL"
		}
		args = append(args, "--log-bin=mysql-bin", "--binlog-format="+format,
			"--binlog-row-image="+image, "--binlog-row-metadata=FULL")
	}
	return append(args, o.ExtraArgs...)
}

func (s *Server) launch(ctx context.Context) error {
	mariadbd, err := lookPath("mariadbd")
	if err != nil {
		return Available()
	}
	// Not CommandContext: the server must outlive the context that started it.
	cmd := exec.Command(mariadbd, s.args()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox: start mariadbd: %w", err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()

	deadline := time.Now().Add(startTimeout)
	for {
		db, err := sql.Open("mysql", s.DSN(""))
		if err == nil {
			pingCtx, cancel := context.WithTimeout(ctx, time.Second)
			err = db.PingContext(pingCtx)
			cancel()
			db.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("sandbox: mariadbd exited during start-up:\n%s", s.ErrorLogTail(20))
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("sandbox: mariadbd did not answer within %s:\n%s", startTimeout, s.ErrorLogTail(20))
		}
	}
}

// ErrorLogTail returns the last n lines of the server's error log, for failure messages.
func (s *Server) ErrorLogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "error.log"))
	return lastLines(string(b), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Config returns driver settings for root over TCP; database may be empty.
func (s *Server) Config(database string) *mysql.Config {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	c.DBName = database
	c.ParseTime = false
	c.InterpolateParams = true
	c.MultiStatements = true
	return c
}

// DSN is Config as a data source name string (root has no password in a sandbox).
func (s *Server) DSN(database string) string { return s.Config(database).FormatDSN() }

// Open returns a pool connected as root to database (may be empty).
func (s *Server) Open(database string) (*sql.DB, error) {
	conn, err := mysql.NewConnector(s.Config(database))
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 30 s) and removes its directory
// unless it was given by the caller or Keep is set.
func (s *Server) Stop() error {
	s.shutdown()
	return s.removeDir()
}

func (s *Server) shutdown() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.kill()
	}
	s.cmd = nil
}

func (s *Server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *Server) removeDir() error {
	if s.ownDir && !s.opts.Keep {
		return os.RemoveAll(s.Dir)
	}
	return nil
}

// Restart stops the server cleanly and starts it again on the same port and datadir, to test
// what happens to a migration when the server goes away.
func (s *Server) Restart(ctx context.Context) error {
	s.shutdown()
	return s.launch(ctx)
}

// Crash kills the server with SIGKILL (no clean shutdown) and starts it again.
func (s *Server) Crash(ctx context.Context) error {
	s.kill()
	s.cmd = nil
	return s.launch(ctx)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("sandbox: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
