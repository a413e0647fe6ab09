package shadow

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Staged chunks need CREATE TEMPORARY TABLES. With it, every chunk goes through the stage; an
// account without it still copies every row, directly, and says why once.
func TestStagedCopyAndItsFallbackWithoutTheGrant(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), b BLOB) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq, CONCAT('v', seq), IF(seq % 7 = 0, NULL, REPEAT('x', seq % 50)) FROM "+sandboxtest.Seq(5000),
		"CREATE USER IF NOT EXISTS 'nostage'@'%' IDENTIFIED BY 'pw-5'",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON `"+schema+"`.* TO 'nostage'@'%'")
	t.Cleanup(func() { sdb.Exec("DROP USER IF EXISTS 'nostage'@'%'") })
	root := dbconn.Config{Host: "127.0.0.1", Port: srv.Port, User: "root", SSLMode: dbconn.SSLDisabled}
	limited := root
	limited.User, limited.Password, limited.PasswordSet = "nostage", "pw-5", true
	ti, err := table.Load(context.Background(), sdb, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		conn   dbconn.Config
		staged bool
	}{{"with the grant", root, true}, {"without the grant", limited, false}} {
		t.Run(c.name, func(t *testing.T) {
			sandboxtest.MustExec(t, sdb, "DROP TABLE IF EXISTS tgt", "CREATE TABLE tgt LIKE t", "ALTER TABLE tgt ENGINE=InnoDB")
			ctx := context.Background()
			reader, err := dbconn.OpenRowReader(ctx, c.conn, "", 2)
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			writer, err := dbconn.OpenRowWriter(ctx, c.conn, "", 2)
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Close()
			q, err := table.NewSQL(ti, "tgt")
			if err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			cfg := copier.Config{Logger: slog.New(slog.NewTextHandler(&log, nil)),
				Pace: copier.Pace{ChunkTime: 1e6, IdleChunkTime: 1e6}} // 1 ms chunks: many of them
			cp := copier.New(reader, writer, q, &order{}, nil, cfg, nil)
			if err := cp.Run(withHooks(ctx, faults.Hooks{CopyStage: faults.Always})); err != nil {
				t.Fatal(err)
			}
			warned := strings.Count(log.String(), "no temporary stage table")
			if staged := cp.Staged() > 0; staged != c.staged || warned != map[bool]int{true: 0, false: 1}[c.staged] {
				t.Fatalf("%d chunks staged, %d warnings (want staged %v)\n%s", cp.Staged(), warned, c.staged, log.String())
			}
			var diff int
			if err := sdb.QueryRow("SELECT COUNT(*) FROM t LEFT JOIN tgt USING (id) WHERE NOT (t.v <=> tgt.v AND t.b <=> tgt.b)").Scan(&diff); err != nil {
				t.Fatal(err)
			}
			var n int
			sdb.QueryRow("SELECT COUNT(*) FROM tgt").Scan(&n)
			if diff != 0 || n != 5000 {
				t.Fatalf("target: %d rows, %d differ from the source", n, diff)
			}
		})
	}
}
