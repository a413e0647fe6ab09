package plan

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Damaged and myisampacked tables cannot be made with SQL: these tests work on the files in the
// sandbox's datadir, which is what happens to such tables in real life.

func TestCrashedTableIsABlockerNotAFailure(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE hit_broken (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE TABLE ok_fine (id INT PRIMARY KEY) ENGINE=MyISAM",
		"INSERT INTO hit_broken VALUES (1), (2)",
		"FLUSH TABLES hit_broken")
	myi := filepath.Join(srv.Dir, "data", schema, "hit_broken.MYI")
	f, err := os.OpenFile(myi, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, 0) // destroy the key file's magic number
	f.Close()
	sandboxtest.MustExec(t, db, "FLUSH TABLES hit_broken")

	p := inspect(t, db, Options{Databases: []string{schema}, TestCompile: true})
	broken, ok := p.Table(schema, "hit_broken")
	if !ok {
		t.Fatalf("crashed table not planned: %+v", p.Tables)
	}
	if f, found := hasCheck(broken.Findings, "crashed"); !found || f.Severity != Blocker || !broken.Blocked {
		t.Fatalf("want crashed blocker, got %+v", broken.Findings)
	}
	fine, _ := p.Table(schema, "ok_fine")
	if _, found := hasCheck(fine.Findings, "crashed"); found {
		t.Fatalf("healthy table reported crashed: %+v", fine.Findings)
	}
}

func TestPackedTableWarns(t *testing.T) {
	pack, err := exec.LookPath("myisampack")
	if err != nil {
		t.Fatalf("myisampack not installed (it ships with mariadb-server): %v", err)
	}
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE hit_packed (id INT PRIMARY KEY, name CHAR(20)) ENGINE=MyISAM",
		"CREATE TABLE ok_unpacked (id INT PRIMARY KEY, name CHAR(20)) ENGINE=MyISAM",
		"INSERT INTO hit_packed SELECT seq, 'name' FROM seq_1_to_200",
		"FLUSH TABLES hit_packed")
	myi := filepath.Join(srv.Dir, "data", schema, "hit_packed.MYI")
	if out, err := exec.Command(pack, "--silent", myi).CombinedOutput(); err != nil {
		t.Fatalf("myisampack: %v\n%s", err, out)
	}
	chk, _ := exec.LookPath("myisamchk")
	if out, err := exec.Command(chk, "-rq", "--silent", myi).CombinedOutput(); err != nil {
		t.Fatalf("myisamchk: %v\n%s", err, out)
	}
	sandboxtest.MustExec(t, db, "FLUSH TABLES hit_packed")
	p := inspect(t, db, Options{Databases: []string{schema}})
	packed, _ := p.Table(schema, "hit_packed")
	if _, found := hasCheck(packed.Findings, "packed-readonly"); !found {
		t.Fatalf("want packed-readonly, got %+v", packed.Findings)
	}
	plain, _ := p.Table(schema, "ok_unpacked")
	if _, found := hasCheck(plain.Findings, "packed-readonly"); found {
		t.Fatalf("unpacked table reported packed")
	}
}
