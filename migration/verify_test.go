package migration

import (
	"context"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/sandbox/sandboxtest"
)

// Rows changed behind enginemig's back in the shadow (no binlog event for the source) must be
// found by verification and repaired before the cut-over, whether verification runs after the
// copy or beside the index build (the table has a secondary index: binlog capture starts
// verification when the build does).
func TestVerifyFindsAndRepairsCorruptedShadow(t *testing.T) {
	for _, c := range []struct{ name, index string }{{"after the copy", ""}, {"beside the index build", ", KEY v (v)"}} {
		t.Run(c.name, func(t *testing.T) { verifyRepairs(t, c.index) })
	}
}

func verifyRepairs(t *testing.T, index string) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), f FLOAT, n INT NULL"+index+") ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, CONCAT('v', seq), seq / 7, IF(seq % 3 = 0, NULL, seq) FROM "+sandboxtest.Seq(20000),
		"CREATE TABLE ref LIKE t", "INSERT INTO ref SELECT * FROM t")
	shadow := dbconn.QualifiedName(schema, "_t_new")
	opts := testOptions(srv, schema, "t")
	logs := &logLines{}
	opts.Logger = logs.logger()
	opts.Hook = func(ctx context.Context, at Point, _ *State) error {
		if at != After(StageCopy) {
			return nil
		}
		// One changed row, one missing row, one extra row, one NULL turned into a value.
		for _, q := range []string{
			"UPDATE " + shadow + " SET v = 'corrupted' WHERE id = 17",
			"DELETE FROM " + shadow + " WHERE id = 9000",
			"INSERT INTO " + shadow + " (id, v) VALUES (30000, 'ghost')",
			"UPDATE " + shadow + " SET n = 0 WHERE id = 3",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verify == nil || res.Verify.Repaired == 0 {
		t.Fatalf("verification repaired nothing: %+v", res.Verify)
	}
	t.Logf("verify: %+v", *res.Verify)
	if beside := strings.Contains(logs.String(), "verifying beside the index build"); beside != (index != "") {
		t.Fatalf("verification beside the index build: %v, want %v", beside, index != "")
	}
	if diff := sameRows(t, db, schema, "t", "ref", []string{"id", "v", "f", "n"}, "id"); diff != "" {
		t.Fatal(diff)
	}
	if diff := sameRows(t, db, schema, "ref", "t", []string{"id", "v", "f", "n"}, "id"); diff != "" {
		t.Fatal(diff)
	}
}
