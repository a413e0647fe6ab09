package plan

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

func TestCheckTableForApply(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	runScript(t, db, `CREATE TABLE good (id INT PRIMARY KEY, v INT) ENGINE=MyISAM;
		INSERT INTO good VALUES (1, 1), (2, 2), (3, 3);
		CREATE TABLE bad (a INT NOT NULL, b INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (a, b)) ENGINE=MyISAM;
		BEGIN; ROLLBACK;`)
	ctx := context.Background()
	srv, _, err := CheckServer(ctx, db, CaptureAuto, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs, e, err := CheckTable(ctx, db, srv, nil, schema, "good", 0)
	if err != nil {
		t.Fatal(err)
	}
	if b := Blockers(fs); len(b) != 0 {
		t.Fatalf("good table has blockers %+v", b)
	}
	if e.SampleRows != 3 || e.CopySeconds <= 0 {
		t.Fatalf("good table's copy estimate: %+v; want one from a sample read of its 3 rows", e)
	}
	if f, ok := hasCheck(fs, "transactions"); !ok || f.Schema != schema {
		t.Fatalf("database-level transactions finding missing from CheckTable: %+v", fs)
	}
	fs, _, err = CheckTable(ctx, db, srv, nil, schema, "bad", 0)
	if err != nil {
		t.Fatal(err)
	}
	if b := Blockers(fs); len(b) != 1 || b[0].Check != "autoinc-not-leading" || !strings.Contains(b[0].Message, "test-compile") {
		t.Fatalf("bad table: want one confirmed autoinc-not-leading blocker, got %+v", fs)
	}
	if _, _, err := CheckTable(ctx, db, srv, nil, schema, "missing", 0); !errors.Is(err, table.ErrNotFound) {
		t.Fatalf("missing table: %v", err)
	}

	// A whole run's Catalog, read once, names a MERGE table over a member and a foreign key to it,
	// as the table's own read does.
	runScript(t, db, `CREATE TABLE good2 LIKE good;
		CREATE TABLE m (id INT NOT NULL, v INT, KEY (id)) ENGINE=MRG_MyISAM UNION=(good, good2);
		SET foreign_key_checks = 0;
		CREATE TABLE child (id INT PRIMARY KEY, gid INT, FOREIGN KEY (gid) REFERENCES good (id)) ENGINE=InnoDB;
		SET foreign_key_checks = 1`)
	cat, err := LoadCatalog(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Catalog{cat, nil} {
		fs, _, err := CheckTable(ctx, db, srv, c, schema, "good", 0)
		if err != nil {
			t.Fatal(err)
		}
		merge, okM := hasCheck(fs, "merge-member")
		fk, okF := hasCheck(fs, "foreign-keys")
		if !okM || !strings.Contains(merge.Message, schema+".m") || !okF || !strings.Contains(fk.Message, schema+".child") {
			t.Fatalf("catalog %v: want the MERGE table m and the foreign key of child named, got %+v", c != nil, fs)
		}
	}
}

func TestTransactionsAreAttributedToTheirDatabase(t *testing.T) {
	used, db := sandboxtest.FreshDatabase(t, srv)
	quiet, qdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MyISAM")
	sandboxtest.MustExec(t, qdb, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=MyISAM")
	runScript(t, db, "SET autocommit = 0; INSERT INTO t VALUES (1); ROLLBACK; SET autocommit = 1; START TRANSACTION; COMMIT")
	p := inspect(t, db, Options{Databases: []string{used, quiet}})
	var got []Finding
	for _, f := range p.Findings {
		if f.Check == "transactions" {
			got = append(got, f)
		}
	}
	if len(got) != 1 || got[0].Schema != used || !strings.Contains(got[0].Message, "ROLLBACK x1") || !strings.Contains(got[0].Message, "SET autocommit x2") {
		t.Fatalf("want one transactions warning for %s only, got %+v", used, got)
	}
	f, _ := sandboxtest.Flavour()
	if swap := strings.Contains(got[0].Message, "1213 at the swap"); swap != f.MySQL() {
		t.Errorf("the warning names the cut-over's deadlock %v, on MySQL %v (only MySQL's cut-over lock queues behind open transactions): %s", swap, f.MySQL(), got[0].Message)
	}
}

// The tables of a whole run take the statement digests from one reading (Catalog.ShareDigests):
// a later table's server checks reuse it, and its statement checks find what they find on a
// reading of their own.
func TestARunSharesOneReadingOfTheDigests(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	runScript(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM; SELECT v FROM t LIMIT 1")
	ctx := context.Background()
	cat, err := LoadCatalog(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	cat.ShareDigests()
	first, _, err := CheckServer(ctx, db, CaptureAuto, 0, cat)
	if err != nil {
		t.Fatal(err)
	}
	runScript(t, db, "SELECT id FROM t WHERE v = 5")
	second, _, err := CheckServer(ctx, db, CaptureAuto, 0, cat)
	if err != nil {
		t.Fatal(err)
	}
	own, _, err := CheckServer(ctx, db, CaptureAuto, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Digests) == 0 || len(second.Digests) != len(first.Digests) || &second.Digests[0] != &first.Digests[0] {
		t.Fatalf("the second table's server checks read the digests again (%d, then %d)", len(first.Digests), len(second.Digests))
	}
	if len(own.Digests) <= len(first.Digests) {
		t.Fatalf("a reading of its own holds %d digests, the shared one %d: the statement run in between is missing", len(own.Digests), len(first.Digests))
	}
	for _, s := range []*ServerInfo{second, own} {
		fs, _, err := CheckTable(ctx, db, s, cat, schema, "t", 0)
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := hasCheck(fs, "limit-without-order-by"); !ok || !strings.Contains(f.Message, "SELECT `v` FROM `t` LIMIT ?") {
			t.Fatalf("shared %v: want the LIMIT without ORDER BY named, got %+v", s == second, fs)
		}
	}
}
