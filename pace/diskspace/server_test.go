package diskspace

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// A server started on this host is recognised as local, with its datadir, binlog and tmpdir.
func TestSameHostAndStatfs(t *testing.T) {
	ctx := context.Background()
	db, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src, why := Detect(ctx, db)
	if src == nil || src.Name() != "statfs" {
		t.Fatalf("a server on this host was not read with statfs: %v %s", src, why)
	}
	fss, err := src.Read(ctx)
	if err != nil || len(fss) == 0 {
		t.Fatalf("read: %v %v", fss, err)
	}
	roles := map[string]bool{}
	for _, f := range fss {
		for _, r := range f.Roles {
			roles[r] = true
		}
		if f.Total == 0 || f.Free > f.Total {
			t.Errorf("implausible figures: %s", f)
		}
	}
	if !roles[RoleDatadir] || !roles[RoleBinlog] || !roles[RoleTmpdir] {
		t.Errorf("roles %v, want datadir, binlog and tmpdir", roles)
	}
}

// information_schema.DISKS (MariaDB's disks plugin) shows the file systems to an account with
// FILE, and nothing to one without: the source then says which privilege is missing.
func TestDisks(t *testing.T) {
	if f, _ := sandboxtest.Flavour(); f != "" && strings.HasPrefix(string(f), "mysql") {
		t.Skip("MySQL has no disks plugin")
	}
	if root := srv.Flavour().Chroot(); root != "" {
		if _, err := os.Stat(root + "/etc/mtab"); err != nil {
			t.Skipf("the %s chroot has no /etc/mtab, the mount table the disks plugin reads", srv.Flavour())
		}
	}
	ctx := context.Background()
	db, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sandboxtest.MustExec(t, db, "INSTALL SONAME 'disks'")
	defer db.Exec("UNINSTALL SONAME 'disks'")
	dirs, err := ServerDirs(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	fss, err := NewDisks(db, dirs).Read(ctx)
	if err != nil || len(fss) == 0 || fss[0].Total == 0 {
		t.Fatalf("DISKS as root: %v %v", fss, err)
	}
	t.Logf("DISKS: %s", describe(fss))
	sandboxtest.MustExec(t, db, "CREATE USER IF NOT EXISTS nofile@'%'", "GRANT PROCESS ON *.* TO nofile@'%'")
	defer db.Exec("DROP USER nofile@'%'")
	c := srv.Config("")
	c.User = "nofile"
	other, err := sandboxOpen(c.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := NewDisks(other, dirs).Read(ctx); err == nil || !strings.Contains(err.Error(), "FILE privilege") {
		t.Errorf("DISKS without FILE: %v, want an error naming the FILE privilege", err)
	}
}

func sandboxOpen(dsn string) (*sql.DB, error) { return sql.Open("mysql", dsn) }
