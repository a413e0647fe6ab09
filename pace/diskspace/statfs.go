package diskspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Local reads the server's file systems with statfs, through root: "/" when the server runs on
// this host, or /proc/PID/root when it runs in a chroot or a mount namespace of it.
type Local struct {
	root string
	dirs Dirs
}

// SameHost decides whether the server runs on this host, and if so returns the path its file
// system is seen under from here. The test is exact, not a guess from names: the server's
// @@hostname must be this host's name, @@pid_file must exist here and hold the id of a running
// process, and that process's working directory must be the server's @@datadir (mariadbd and
// mysqld change into their datadir at start-up). A replica or a copy of the datadir on this host
// fails the last test (its process's directory is another, or no process has that id), and a
// host of the same name elsewhere fails the second. Reading /proc/PID needs enginemig to run as
// the server's user or root; otherwise the answer is no, with why.
func SameHost(ctx context.Context, db dbconn.Querier) (root string, why string) {
	var host, pidFile, datadir string
	if err := db.QueryRowContext(ctx, "SELECT @@hostname, @@pid_file, @@datadir").Scan(&host, &pidFile, &datadir); err != nil {
		return "", "cannot read @@hostname, @@pid_file, @@datadir: " + err.Error()
	}
	here, err := os.Hostname()
	if err != nil || !strings.EqualFold(here, host) {
		return "", fmt.Sprintf("the server's host name is %s, this host's %s", host, here)
	}
	if !filepath.IsAbs(pidFile) {
		pidFile = filepath.Join(datadir, pidFile)
	}
	// The server may live in a chroot: its paths are then under its /proc/PID/root. Try the
	// host's view first, then every running server's (a chroot's pid file is not where the
	// server says from here).
	if root, ok := byPidFile(pidFile, datadir, ""); ok {
		return root, ""
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/root")
	for _, r := range procs {
		if root, ok := byPidFile(filepath.Join(r, pidFile), datadir, r); ok {
			return root, ""
		}
	}
	return "", fmt.Sprintf("no process on this host has the server's pid file %s with %s as its directory", pidFile, datadir)
}

// byPidFile checks that the process named by pidFile (seen from here) runs in datadir (seen from
// its own root), and returns the path its root is seen under from here.
func byPidFile(pidFile, datadir, via string) (string, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return "", false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return "", false
	}
	proc := "/proc/" + strconv.Itoa(pid)
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil {
		return "", false
	}
	root, err := os.Readlink(proc + "/root")
	if err != nil {
		return "", false
	}
	// cwd is shown from this process's root: strip the server's own root to compare.
	if root != "/" {
		cwd = "/" + strings.TrimPrefix(strings.TrimPrefix(cwd, root), "/")
	}
	if filepath.Clean(cwd) != filepath.Clean(datadir) {
		return "", false
	}
	if via != "" && root == "/" {
		return "", false // found only through another process's root: not this server
	}
	if root == "/" {
		return "", true
	}
	return proc + "/root", true
}

// NewLocal reads dirs under root (SameHost's answer).
func NewLocal(root string, dirs Dirs) *Local { return &Local{root: root, dirs: dirs} }

// Name says where the figures come from.
func (l *Local) Name() string { return "statfs" }

// Read measures each distinct file system once (directories on one device share it).
func (l *Local) Read(context.Context) ([]FS, error) {
	var out []FS
	index := map[uint64]int{}
	var errs []string
	l.dirs.each(func(dir, role string) {
		path := filepath.Join(l.root, dir)
		var st syscall.Stat_t
		var fs syscall.Statfs_t
		if err := syscall.Stat(path, &st); err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: %v", role, dir, err))
			return
		}
		if err := syscall.Statfs(path, &fs); err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: %v", role, dir, err))
			return
		}
		if i, ok := index[st.Dev]; ok {
			addRole(&out[i], dir, role)
			return
		}
		index[st.Dev] = len(out)
		f := FS{Mount: dir, Total: fs.Blocks * uint64(fs.Bsize), Free: fs.Bavail * uint64(fs.Bsize)}
		addRole(&f, dir, role)
		out = append(out, f)
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("statfs: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

func addRole(f *FS, dir, role string) {
	if !contains(f.Dirs, dir) {
		f.Dirs = append(f.Dirs, dir)
	}
	if !contains(f.Roles, role) {
		f.Roles = append(f.Roles, role)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
