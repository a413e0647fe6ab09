package migration

import (
	"context"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
)

// Ids handed out by MyISAM and then deleted must not be reused by the InnoDB table, including ids
// used after the shadow was created (the shadow starts with the source's counter; replayed inserts
// advance it).
func TestAutoIncrementCounterCarriedOverAtCutover(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t (v) SELECT seq FROM "+sandboxtest.Seq(100))
	q := dbconn.QualifiedName(schema, "t")
	opts := testOptions(srv, schema, "t")
	opts.Hook = func(ctx context.Context, at Point, _ *state.State) error {
		if at != Before(state.StageCutover) {
			return nil
		}
		// After the shadow exists: ids 101..110 are handed out and deleted again.
		for _, stmt := range []string{"INSERT INTO " + q + " (v) SELECT seq FROM " + sandboxtest.Seq(10), "DELETE FROM " + q + " WHERE id > 100"} {
			if _, err := sdb.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := Run(context.Background(), db, opts); err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec("INSERT INTO " + q + " (v) VALUES (0)")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 111 {
		t.Fatalf("first id after the cut-over is %d, want 111 (ids 101-110 were already used)", id)
	}
}
