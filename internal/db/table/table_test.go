package table

import (
	"context"
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

func TestLoadAndShadowKeepsDefinitionButDefersIndexes(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE `odd ``name` (id INT UNSIGNED NOT NULL AUTO_INCREMENT, a VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, b INT NOT NULL, "+
		"c CHAR(40) NOT NULL DEFAULT '', g INT AS (b*2) VIRTUAL, PRIMARY KEY (id), UNIQUE KEY ub (b), KEY `k a` (a(10), c), FULLTEXT KEY ft (c)) "+
		"ENGINE=MyISAM DEFAULT CHARSET=latin1 ROW_FORMAT=FIXED PACK_KEYS=1 CHECKSUM=1 DELAY_KEY_WRITE=1 AUTO_INCREMENT=1000 COMMENT='it''s'")
	ctx := context.Background()
	ti, err := Load(ctx, db, schema, "odd `name")
	if err != nil {
		t.Fatal(err)
	}
	if ti.Engine != "MyISAM" || len(ti.Columns) != 5 || len(ti.Indexes) != 4 {
		t.Fatalf("loaded %+v", ti)
	}
	key, ok := ti.CopyKey()
	if !ok || key.Name != "PRIMARY" {
		t.Fatalf("copy key %+v", key)
	}
	if n := len(ti.CopyColumns()); n != 4 {
		t.Fatalf("copy columns %d, want 4 (generated skipped)", n)
	}
	d, err := ti.Shadow(ShadowName(ti.Name), true, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Deferred) != 3 || d.DropFulltext == "" {
		t.Fatalf("deferred %v, drop %q", d.Deferred, d.DropFulltext)
	}
	if _, err := db.Exec(d.Create); err != nil {
		t.Fatalf("create shadow: %v\n%s", err, d.Create)
	}
	if _, err := db.Exec(d.DropFulltext); err != nil {
		t.Fatalf("drop the FULLTEXT index: %v", err)
	}
	for _, b := range AddIndexesDDL(schema, ShadowName(ti.Name), d.Deferred) {
		if _, err := db.Exec(b.DDL); err != nil {
			t.Fatalf("add indexes: %v\n%s", err, b.DDL)
		}
	}
	sh, err := Load(ctx, db, schema, ShadowName(ti.Name))
	if err != nil {
		t.Fatal(err)
	}
	if sh.Engine != "InnoDB" || sh.AutoIncrement != 1000 || sh.Collation != "latin1_swedish_ci" || sh.Comment != "it's" {
		t.Fatalf("shadow %+v", sh)
	}
	if len(sh.Indexes) != len(ti.Indexes) {
		t.Fatalf("shadow indexes %v vs %v", sh.Indexes, ti.Indexes)
	}
	for i := range ti.Columns {
		if sh.Columns[i] != ti.Columns[i] {
			t.Fatalf("column %d differs: %+v vs %+v", i, sh.Columns[i], ti.Columns[i])
		}
	}
	if !strings.Contains(strings.Join(d.Changes, ";"), "ROW_FORMAT=FIXED") {
		t.Fatalf("changes %v", d.Changes)
	}
}

func TestCopyKeyFallsBackToUniqueNotNull(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE u (a INT NOT NULL, b INT NOT NULL, c INT NULL, UNIQUE KEY ab (a,b), UNIQUE KEY c (c), UNIQUE KEY a1 (a)) ENGINE=MyISAM",
		"CREATE TABLE n (a INT NULL, UNIQUE KEY a (a)) ENGINE=MyISAM")
	ctx := context.Background()
	u, _ := Load(ctx, db, schema, "u")
	if k, ok := u.CopyKey(); !ok || k.Name != "a1" {
		t.Fatalf("want a1, got %+v %v", k, ok)
	}
	n, _ := Load(ctx, db, schema, "n")
	if _, ok := n.CopyKey(); ok {
		t.Fatal("nullable unique key must not be usable")
	}
	if _, err := Load(ctx, db, schema, "missing"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing: %v", err)
	}
}

func TestShadowOfPartitionedTable(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE p (id INT NOT NULL, v INT, PRIMARY KEY (id), KEY v (v)) ENGINE=MyISAM PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN MAXVALUE)")
	ti, err := Load(context.Background(), db, schema, "p")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ti.Shadow("_p_new", true, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(d.Create); err != nil {
		t.Fatalf("%v\n%s", err, d.Create)
	}
	var engine string
	db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME='_p_new'", schema).Scan(&engine)
	if engine != "InnoDB" {
		t.Fatalf("engine %s", engine)
	}
}
