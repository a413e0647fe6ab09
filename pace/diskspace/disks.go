package diskspace

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/go-sql-driver/mysql"
)

// Disks reads MariaDB's information_schema.DISKS (the disks plugin: INSTALL SONAME 'disks'; the
// account needs the FILE privilege to see its rows). It lists mounted file systems by mount point,
// in KiB; each of the server's directories belongs to the longest mount point that contains it.
// The server resolves no symbolic links for this, so a datadir that is a link to another file
// system is attributed to the link's.
type Disks struct {
	db   dbconn.Querier
	dirs Dirs
}

// NewDisks reads dirs' file systems through db.
func NewDisks(db dbconn.Querier, dirs Dirs) *Disks { return &Disks{db: db, dirs: dirs} }

// Name says where the figures come from.
func (d *Disks) Name() string { return "information_schema.DISKS" }

type mount struct {
	path        string
	total, free uint64
}

// Read reads the mounts and attributes each directory to one.
func (d *Disks) Read(ctx context.Context) ([]FS, error) {
	rows, err := d.db.QueryContext(ctx, "SELECT Path, Total, Available FROM information_schema.DISKS")
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1105 {
		// The plugin reads the mount table (/etc/mtab) and says only "Unknown error" without it.
		return nil, fmt.Errorf("information_schema.DISKS: %w (the server cannot read its mount table, /etc/mtab)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("information_schema.DISKS: %w", err)
	}
	defer rows.Close()
	var mounts []mount
	for rows.Next() {
		var m mount
		if err := rows.Scan(&m.path, &m.total, &m.free); err != nil {
			return nil, fmt.Errorf("information_schema.DISKS: %w", err)
		}
		m.total, m.free = m.total<<10, m.free<<10
		mounts = append(mounts, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("information_schema.DISKS: %w", err)
	}
	if len(mounts) == 0 {
		return nil, fmt.Errorf("information_schema.DISKS is empty: the account needs the FILE privilege to see it")
	}
	var out []FS
	index := map[string]int{}
	var missing []string
	d.dirs.each(func(dir, role string) {
		m, ok := mountOf(mounts, dir)
		if !ok {
			missing = append(missing, dir)
			return
		}
		if i, ok := index[m.path]; ok {
			addRole(&out[i], dir, role)
			return
		}
		index[m.path] = len(out)
		f := FS{Mount: m.path, Total: m.total, Free: m.free}
		addRole(&f, dir, role)
		out = append(out, f)
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("information_schema.DISKS lists no mount holding %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// mountOf is the mount with the longest path containing dir.
func mountOf(mounts []mount, dir string) (mount, bool) {
	var best mount
	found := false
	for _, m := range mounts {
		p := filepath.Clean(m.path)
		if (dir == p || p == "/" || strings.HasPrefix(dir, p+"/")) && (!found || len(p) > len(best.path)) {
			best, found = mount{path: p, total: m.total, free: m.free}, true
		}
	}
	return best, found
}
