// Package diskspace watches the free space of the file systems a conversion writes to on the
// database server: the datadir (the shadow table), the binlog directory and the server's tmpdir
// (index builds, large transactions' binlog caches). It reads them with statfs when enginemig runs
// on the database host (SameHost says how that is established), else from MariaDB's
// information_schema.DISKS; MySQL offers no view of free space, so there nothing is watched and the
// caller says so. It only reads; the migration decides what to do about what it sees.
package diskspace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Roles of a file system: what the server writes there that a conversion makes grow.
const (
	RoleDatadir = "datadir" // the shadow table (file-per-table), MyISAM tables, InnoDB's own files
	RoleBinlog  = "binlog"  // the binlog, retained after the copy until expired or purged
	RoleTmpdir  = "tmpdir"  // index builds' sort files, binlog caches of large transactions
)

// FS is one file system as last read, with the roles it plays for the server.
type FS struct {
	// Mount is the file system's mount point (information_schema.DISKS) or the first of the
	// server's directories on it (statfs).
	Mount string   `json:"mount"`
	Dirs  []string `json:"dirs"`
	Roles []string `json:"roles"`
	Total uint64   `json:"total_bytes"`
	Free  uint64   `json:"free_bytes"` // available to the server (not counting root's reserved blocks)
	// Reserve is the free space apply keeps on it (Reserve.Of(Total)).
	Reserve uint64 `json:"reserve_bytes"`
}

// Low reports free space under the reserve.
func (f FS) Low() bool { return f.Free < f.Reserve }

// String names the file system with its numbers, for a log line or an error.
func (f FS) String() string {
	return fmt.Sprintf("%s on %s: %s free of %s (reserve %s)", strings.Join(f.Roles, "+"), f.Mount,
		Human(f.Free), Human(f.Total), Human(f.Reserve))
}

// Reserve is the free space apply keeps on each file system: the larger of Bytes and Share of the
// file system's size.
type Reserve struct {
	Bytes uint64
	Share float64
}

// DefaultReserve keeps a tenth of the file system free, and at least 1 GiB: what an application
// writing its own rows, logs and binlogs needs while someone is paged and looks (a server that
// fills its disk stops every write). docs/how-it-works/pace.md, "Disk space", says why.
var DefaultReserve = Reserve{Bytes: 1 << 30, Share: 0.10}

// Of is the reserve on a file system of total bytes, never more than its size.
func (r Reserve) Of(total uint64) uint64 {
	return min(total, max(r.Bytes, uint64(r.Share*float64(total))))
}

// String is the reserve as --disk-reserve takes it.
func (r Reserve) String() string {
	switch {
	case r.Share > 0 && r.Bytes > 0:
		return fmt.Sprintf("max(%g%%,%s)", r.Share*100, Human(r.Bytes))
	case r.Share > 0:
		return fmt.Sprintf("%g%%", r.Share*100)
	}
	return Human(r.Bytes)
}

// ParseReserve reads --disk-reserve: a size (512M, 2G, 1.5GiB, 0) or a share of the file system
// (10%).
func ParseReserve(s string) (Reserve, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("--disk-reserve %q: want a size such as 512M or 2G, a share such as 10%%, or 0", s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 || math.IsNaN(f) {
			return Reserve{}, bad
		}
		return Reserve{Share: f / 100}, nil
	}
	n, err := ParseSize(s)
	if err != nil {
		return Reserve{}, bad
	}
	return Reserve{Bytes: n}, nil
}

// ParseSize reads a byte count with an optional binary unit (K, M, G, T; KB, KiB... alike).
func ParseSize(s string) (uint64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	u = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(u, "IB"), "B"), "I")
	mult := uint64(1)
	if u != "" {
		switch u[len(u)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			u = u[:len(u)-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(u), 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return uint64(f * float64(mult)), nil
}

// Human prints a byte count in binary units.
func Human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// Dirs are the server's directories whose file systems are watched, as the server names them.
type Dirs struct {
	Datadir string
	Binlog  string   // "" without a binlog
	Tmpdirs []string // @@tmpdir may list several (":"-separated)
}

// each calls f for every directory with its role.
func (d Dirs) each(f func(dir, role string)) {
	f(d.Datadir, RoleDatadir)
	if d.Binlog != "" {
		f(d.Binlog, RoleBinlog)
	}
	for _, t := range d.Tmpdirs {
		f(t, RoleTmpdir)
	}
}

// ServerDirs reads the server's datadir, binlog directory and tmpdir.
func ServerDirs(ctx context.Context, q dbconn.Querier) (Dirs, error) {
	var datadir, tmpdir string
	var basename *string
	if err := q.QueryRowContext(ctx, "SELECT @@datadir, @@tmpdir").Scan(&datadir, &tmpdir); err != nil {
		return Dirs{}, fmt.Errorf("read @@datadir: %w", err)
	}
	// @@log_bin_basename is NULL without a binlog; a relative name lives in the datadir.
	if err := q.QueryRowContext(ctx, "SELECT @@log_bin_basename").Scan(&basename); err != nil {
		basename = nil
	}
	d := Dirs{Datadir: filepath.Clean(datadir)}
	if basename != nil && *basename != "" {
		b := *basename
		if !filepath.IsAbs(b) {
			b = filepath.Join(d.Datadir, b)
		}
		d.Binlog = filepath.Dir(b)
	}
	for _, t := range strings.FieldsFunc(tmpdir, func(r rune) bool { return r == ':' || r == ';' }) {
		d.Tmpdirs = append(d.Tmpdirs, filepath.Clean(t))
	}
	return d, nil
}

// ErrNoSource says free space cannot be read for this server.
var ErrNoSource = errors.New("free disk space cannot be read")
