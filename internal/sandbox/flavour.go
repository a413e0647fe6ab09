package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Flavour names a server product and version a sandbox runs. The host's MariaDB (10.11 on this
// project's CI) needs nothing else; the others run from Debian chroots that .ci/chroots.sh builds.
type Flavour string

// The flavours the tests run on.
const (
	// MariaDB1011 is the host's own mariadbd (Debian 12 ships 10.11). The zero Flavour means it.
	MariaDB1011 Flavour = "mariadb-10.11"
	// MariaDB118 is MariaDB 11.8 from a Debian 13 (trixie) chroot.
	MariaDB118 Flavour = "mariadb-11.8"
	// MySQL97 is Oracle MySQL 9.7 from a Debian unstable (sid) chroot, run with its defaults:
	// gtid_mode=ON, enforce_gtid_consistency=ON, binlog_row_metadata=MINIMAL, sync_binlog=1.
	MySQL97 Flavour = "mysql-9.7"
)

// Flavours lists every flavour, the host's first.
func Flavours() []Flavour { return []Flavour{MariaDB1011, MariaDB118, MySQL97} }

// ParseFlavour accepts a flavour's name; empty means MariaDB1011.
func ParseFlavour(s string) (Flavour, error) {
	if s == "" {
		return MariaDB1011, nil
	}
	for _, f := range Flavours() {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("sandbox: unknown flavour %q (one of %v)", s, Flavours())
}

func (f Flavour) orDefault() Flavour {
	if f == "" {
		return MariaDB1011
	}
	return f
}

// MySQL reports whether the flavour is Oracle MySQL rather than MariaDB.
func (f Flavour) MySQL() bool { return f == MySQL97 }

// suite is the Debian suite whose chroot holds the server, or "" for the host.
func (f Flavour) suite() string {
	switch f.orDefault() {
	case MariaDB118:
		return "trixie"
	case MySQL97:
		return "sid"
	}
	return ""
}

// serverBin is the server binary's name.
func (f Flavour) serverBin() string {
	if f.MySQL() {
		return "mysqld"
	}
	return "mariadbd"
}

// ChrootRoot is where .ci/chroots.sh caches its chroots: $ENGINEMIG_CHROOTS, by default
// /var/cache/enginemig-chroots.
func ChrootRoot() string {
	if d := os.Getenv("ENGINEMIG_CHROOTS"); d != "" {
		return d
	}
	return "/var/cache/enginemig-chroots"
}

// Chroot is the flavour's chroot directory, or "" when it runs from the host.
func (f Flavour) Chroot() string {
	if s := f.suite(); s != "" {
		return filepath.Join(ChrootRoot(), s)
	}
	return ""
}

// Available reports whether the flavour's server can be started here, with the fix when not.
func (f Flavour) Available() error {
	root := f.Chroot()
	if root == "" {
		return Available()
	}
	if _, err := os.Stat(filepath.Join(root, ".enginemig-ready")); err != nil {
		return fmt.Errorf("sandbox: %s needs the %s chroot at %s: run .ci/chroots.sh %s as root", f, f.suite(), root, f.suite())
	}
	if _, err := os.Stat(filepath.Join(root, "usr/sbin", f.serverBin())); err != nil {
		return fmt.Errorf("sandbox: %s: %w (rebuild the chroot: rm -rf %s; .ci/chroots.sh %s)", f, err, root, f.suite())
	}
	return nil
}

// mountChroot makes sure /proc and /dev are mounted inside the chroot (the servers need both);
// a reboot unmounts them. A file lock keeps concurrent test binaries from mounting twice.
func mountChroot(root string) error {
	lock, err := os.OpenFile(filepath.Join(root, ".enginemig-mount.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox: lock chroot mounts: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("sandbox: lock chroot mounts: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	mounted, err := mountPoints()
	if err != nil {
		return err
	}
	for _, m := range []struct {
		dir, source, fstype string
		flags               uintptr
	}{{"proc", "proc", "proc", 0}, {"dev", "/dev", "", syscall.MS_BIND}} {
		target := filepath.Join(root, m.dir)
		if mounted[target] {
			continue
		}
		if err := syscall.Mount(m.source, target, m.fstype, m.flags, ""); err != nil {
			return fmt.Errorf("sandbox: mount %s in the chroot (needs root; or run .ci/chroots.sh): %w", target, err)
		}
	}
	return nil
}

func mountPoints() (map[string]bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("sandbox: read mounts: %w", err)
	}
	defer f.Close()
	points := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			points[fields[4]] = true
		}
	}
	return points, sc.Err()
}

// command returns the program and arguments that run bin of the flavour: on the host, or inside
// its chroot (whose /proc and /dev it mounts first).
func (f Flavour) command(bin string, args ...string) (string, []string, error) {
	root := f.Chroot()
	if root == "" {
		p, err := lookPath(bin)
		if err != nil {
			return "", nil, Available()
		}
		return p, args, nil
	}
	if err := mountChroot(root); err != nil {
		return "", nil, err
	}
	for _, dir := range []string{"/usr/sbin/", "/usr/bin/"} {
		if _, err := os.Stat(filepath.Join(root, dir, bin)); err == nil {
			return "chroot", append([]string{root, dir + bin}, args...), nil
		}
	}
	return "", nil, fmt.Errorf("sandbox: %s not found in %s: %w", bin, root, exec.ErrNotFound)
}

// initDatadir initialises an empty datadir at dir (a path as the server sees it).
func (f Flavour) initDatadir(ctx context.Context, dir string) error {
	var prog string
	var args []string
	var err error
	if f.MySQL() {
		// MySQL's root is root@localhost only, which a TCP client with --skip-name-resolve is not.
		init := filepath.Join(filepath.Dir(dir), "init.sql")
		if err := os.WriteFile(filepath.Join(f.Chroot(), init), []byte(mysqlRootSQL), 0o644); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		// No binlog while initialising, and the redo log size the servers run with.
		prog, args, err = f.command("mysqld", "--no-defaults", "--initialize-insecure", "--datadir="+dir,
			"--user=root", "--disable-log-bin", "--innodb-redo-log-capacity=48M", "--init-file="+init)
	} else {
		prog, args, err = f.command("mariadb-install-db", "--no-defaults", "--datadir="+dir, "--user=root",
			"--auth-root-authentication-method=normal", "--innodb-log-file-size=48M", "--skip-test-db")
	}
	if err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, prog, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("sandbox: initialise %s datadir: %w\n%s", f.orDefault(), err, lastLines(string(out), 20))
	}
	return nil
}

// mysqlRootSQL gives MySQL's sandbox root the same access over 127.0.0.1 as over the socket.
const mysqlRootSQL = `CREATE USER 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
GRANT PROXY ON ''@'' TO 'root'@'127.0.0.1' WITH GRANT OPTION;
`
