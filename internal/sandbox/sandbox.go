// Package sandbox starts private, throwaway MariaDB or MySQL servers (own datadir, free port, the
// binlog settings enginemig needs) for tests and for the demo, and stops them again. The host's
// MariaDB is the default; other versions run from Debian chroots (Flavour). The demo ships in
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
	// Flavour is the server to run; empty means the host's MariaDB (MariaDB1011).
	Flavour Flavour
	// BinlogFormat is ROW (default), STATEMENT, MIXED, or OFF to start without a binlog.
	BinlogFormat string
	// RowImage is FULL (default), MINIMAL or NOBLOB.
	RowImage string
	// ServerID defaults to 1.
	ServerID int
	// Port is the SQL port on 127.0.0.1; 0 picks a free one.
	Port int
	// BufferPool is innodb_buffer_pool_size, default 256M.
	BufferPool string
	// ExtraArgs are appended to the server's command line (e.g. "--key-buffer-size=64M").
	ExtraArgs []string
	// Dir, when set, is where the server lives; otherwise a temporary directory that Stop removes.
	Dir string
	// DataDir, when set, is an empty directory the caller made for the datadir (and with it the
	// binlog), such as a small file system a test mounted; otherwise it is Dir/data. The host's
	// MariaDB only. Stop leaves it and what is in it to the caller.
	DataDir string
	// Keep leaves the directory in place on Stop (for the demo's --keep).
	Keep bool
	// Prepare, when set, is called with the server's directory once its datadir is in place and
	// before the server first starts (a Galera joiner's datadir must be writable by the SST's
	// rsync daemon, which runs as nobody).
	Prepare func(dir string) error
}

// Server is one running mariadbd or mysqld.
type Server struct {
	// Dir is the server's directory as the host sees it; for a chroot flavour it lies inside
	// the chroot.
	Dir    string
	Socket string
	Port   int
	opts   Options
	cmd    *exec.Cmd
	exited chan struct{}
	ownDir bool
	root   string // the chroot, or "" on the host
}

// Flavour is the server's flavour.
func (s *Server) Flavour() Flavour { return s.opts.Flavour.orDefault() }

// inner turns a host path under the server's chroot into the path the server sees.
func (s *Server) inner(p string) string {
	if s.root == "" {
		return p
	}
	return "/" + strings.TrimPrefix(strings.TrimPrefix(p, s.root), "/")
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

// pristineDatadir returns a freshly initialised datadir of flavour f, shared by all sandboxes on
// this machine (inside the chroot for a chroot flavour). Copying it (a few tens of MB) is much
// faster than initialising one for every server. A file lock makes concurrent test binaries
// (go test ./... runs packages in parallel) build it once.
func pristineDatadir(ctx context.Context, f Flavour) (string, error) {
	pristineMu.Lock()
	defer pristineMu.Unlock()
	bin, err := serverPath(f)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(bin)
	if err != nil {
		return "", err
	}
	dir := os.TempDir()
	if root := f.Chroot(); root != "" {
		dir = filepath.Join(root, "var/lib")
	}
	base := filepath.Join(dir, fmt.Sprintf("enginemig-pristine-%s-%d-%d", f.orDefault(), st.Size(), st.ModTime().Unix()))
	if f.orDefault() == MariaDB1011 { // the name earlier versions of this package used
		base = filepath.Join(dir, fmt.Sprintf("enginemig-pristine-%d-%d", st.Size(), st.ModTime().Unix()))
	}
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
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	data := filepath.Join(base, "data")
	innerData := data
	if root := f.Chroot(); root != "" {
		innerData = "/" + strings.TrimPrefix(strings.TrimPrefix(data, root), "/")
	}
	if err := f.initDatadir(ctx, innerData); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(base, "ready"), nil, 0o644); err != nil {
		return "", err
	}
	return data, nil
}

// serverPath is the server binary as the host sees it.
func serverPath(f Flavour) (string, error) {
	if root := f.Chroot(); root != "" {
		if err := f.Available(); err != nil {
			return "", err
		}
		return filepath.Join(root, "usr/sbin", f.serverBin()), nil
	}
	p, err := lookPath("mariadbd")
	if err != nil {
		return "", Available()
	}
	return p, nil
}

// Start creates a datadir and starts the server on a free loopback port, waiting until it answers.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := opts.Flavour.orDefault().Available(); err != nil {
		return nil, err
	}
	pristine, err := pristineDatadir(ctx, opts.Flavour)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, Dir: opts.Dir, root: opts.Flavour.Chroot()}
	if s.root != "" && (opts.Dir != "" || opts.DataDir != "") {
		return nil, fmt.Errorf("sandbox: Options.Dir and DataDir are not supported for %s (the datadir must be inside the chroot)", opts.Flavour)
	}
	if s.Dir == "" {
		// Short path: the unix socket path must stay under 108 bytes.
		tmp := ""
		if s.root != "" {
			tmp = filepath.Join(s.root, "tmp")
		}
		s.Dir, err = os.MkdirTemp(tmp, "emsb-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		s.ownDir = true
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	from, to := pristine, s.datadir()
	if opts.DataDir != "" {
		from += "/." // into the directory given, which exists
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", from, to).CombinedOutput(); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("sandbox: copy datadir: %w: %s", err, out)
	}
	// MySQL keeps its server_uuid in auto.cnf; each copy must make its own (GTIDs, replication).
	os.Remove(filepath.Join(s.datadir(), "auto.cnf"))
	if opts.Prepare != nil {
		if err := opts.Prepare(s.Dir); err != nil {
			s.removeDir()
			return nil, fmt.Errorf("sandbox: prepare %s: %w", s.Dir, err)
		}
	}
	s.Socket = filepath.Join(s.Dir, "mysql.sock")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if s.Port = opts.Port; s.Port == 0 {
			if s.Port, err = freePort(); err != nil {
				return nil, err
			}
		}
		if lastErr = s.launch(ctx); lastErr == nil {
			return s, nil
		}
	}
	s.removeDir()
	return nil, lastErr
}

// datadir is the server's datadir as the host sees it.
func (s *Server) datadir() string {
	if s.opts.DataDir != "" {
		return s.opts.DataDir
	}
	return filepath.Join(s.Dir, "data")
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
		"--datadir=" + s.inner(s.datadir()),
		"--socket=" + s.inner(s.Socket),
		"--port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1",
		"--user=root",
		"--pid-file=" + s.inner(filepath.Join(s.Dir, s.Flavour().serverBin()+".pid")),
		"--log-error=" + s.inner(filepath.Join(s.Dir, "error.log")),
		"--tmpdir=" + s.inner(s.Dir),
		"--server-id=" + strconv.Itoa(id),
		"--performance-schema=ON",
		"--innodb-buffer-pool-size=" + bp,
		"--skip-name-resolve",
		"--max-connections=500",
	}
	if s.Flavour().MySQL() {
		// MySQL keeps its defaults otherwise (GTID on, binlog_row_metadata=MINIMAL, sync_binlog=1).
		// The X plugin would listen on 33060 in every sandbox.
		args = append(args, "--innodb-redo-log-capacity=48M", "--mysqlx=OFF",
			"--relay-log=mysql-relay-bin", "--log-bin=mysql-bin")
		if o.BinlogFormat != "" && !strings.EqualFold(o.BinlogFormat, "OFF") {
			args = append(args, "--binlog-format="+o.BinlogFormat)
		}
		if strings.EqualFold(o.BinlogFormat, "OFF") {
			args = append(args[:len(args)-1], "--disable-log-bin")
		}
		if o.RowImage != "" {
			args = append(args, "--binlog-row-image="+o.RowImage)
		}
		return append(args, o.ExtraArgs...)
	}
	args = append(args, "--innodb-log-file-size=48M", "--log-basename=mysql")
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
	bin := s.Flavour().serverBin()
	prog, args, err := s.Flavour().command(bin, s.args()...)
	if err != nil {
		return err
	}
	// Not CommandContext: the server must outlive the context that started it. In a chroot,
	// chroot(8) execs the server, so the process is the server itself.
	cmd := exec.Command(prog, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox: start %s: %w", bin, err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()

	deadline := time.Now().Add(startTimeout)
	for {
		if s.answers(ctx) {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("sandbox: %s exited during start-up:\n%s", bin, s.ErrorLogTail(20))
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("sandbox: %s did not answer within %s:\n%s", bin, startTimeout, s.ErrorLogTail(20))
		}
	}
}

// answers reports whether this server answers on its port. The one answering must be this server
// (its own socket): freePort's port is free only until someone binds it, and another test's
// server once took it first and answered in its place (a Galera node, whose "WSREP has not yet
// prepared node" then failed a test of another flavour). This server then fails to bind and
// exits, and Start tries another port.
func (s *Server) answers(ctx context.Context) bool {
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return false
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	// SHOW, not SELECT: a Galera node answers it before it has joined its cluster.
	var name, socket string
	return db.QueryRowContext(qctx, "SHOW VARIABLES LIKE 'socket'").Scan(&name, &socket) == nil && socket == s.inner(s.Socket)
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
// Pid is the server process's id, for a benchmark's CPU accounting.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

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
	s.Halt()
	return s.Relaunch(ctx)
}

// Halt stops the server cleanly and keeps its datadir and port, for a test in which the server
// stays away for a while; Relaunch brings it back.
func (s *Server) Halt() { s.shutdown() }

// Relaunch starts a halted server again on the same port and datadir.
func (s *Server) Relaunch(ctx context.Context) error { return s.launch(ctx) }

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
