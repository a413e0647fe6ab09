package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/diskspace"
)

// The binlog on a file system of its own is checked against the copy's binlog alone, and the
// finding says how long the server keeps it.
func TestTableDiskCountsTheBinlogWhereItIs(t *testing.T) {
	s := server("10.11.6-MariaDB", map[string]string{"binlog_expire_logs_seconds": "864000"})
	s.Disk = []diskspace.FS{
		{Mount: "/var/lib/mysql", Roles: []string{diskspace.RoleDatadir}, Free: 100 << 20},
		{Mount: "/binlog", Roles: []string{diskspace.RoleBinlog}, Free: 5 << 20},
	}
	s.FreeDiskBytes = 100 << 20
	in := &TableInput{Info: &table.Info{Schema: "s", Name: "t"}, Server: s,
		Estimate: &Estimate{ProjectedBytes: 30 << 20, BinlogBytes: 20 << 20, ExtraDiskBytes: 50 << 20}}
	got := checkTableDisk(in)
	if len(got) != 1 || got[0].Severity != Blocker || !strings.Contains(got[0].Message, "/binlog") || !strings.Contains(got[0].Message, "240h0m0s") {
		t.Fatalf("binlog file system too small: %+v", got)
	}
	s.Disk[1].Free = 50 << 20 // the datadir has room for the shadow, the binlog's for the binlog
	if got := checkTableDisk(in); len(got) != 0 {
		t.Fatalf("both fit: %+v", got)
	}
}

// Without a view of free space, plan says why and what it cannot see.
func TestServerDiskUnknownSaysWhy(t *testing.T) {
	s := withTotals(server("10.11.6-MariaDB", nil), 1<<30, -1)
	s.DiskUnseen = "free disk space cannot be read: not on the database host"
	got := checkServerDisk(s)
	if len(got) != 1 || !strings.Contains(got[0].Message, "not on the database host") || !strings.Contains(got[0].Message, "kept until purged") ||
		!strings.Contains(got[0].Remedy, "INSTALL SONAME 'disks'") || !strings.Contains(got[0].Remedy, "cannot see") {
		t.Fatalf("%+v", got)
	}
}

// plan reads its server's file systems as apply does, through the session it plans with: on the
// database host, with statfs, the datadir's, binlog's and tmpdir's.
func TestServerDiskIsRead(t *testing.T) {
	db, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := LoadServer(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if s.FreeDiskBytes <= 0 || s.DiskSource != "statfs" || s.DiskUnseen != "" {
		t.Fatalf("free %d, source %q, unseen %q: want the datadir's free space read with statfs", s.FreeDiskBytes, s.DiskSource, s.DiskUnseen)
	}
	if _, ok := s.fsOf(diskspace.RoleBinlog); !ok {
		t.Errorf("no binlog file system in %+v", s.Disk)
	}
}
