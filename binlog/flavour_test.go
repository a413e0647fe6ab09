package binlog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// On every flavour: the binlog position is read (SHOW MASTER STATUS on MariaDB, SHOW BINARY LOG
// STATUS on MySQL 9.7, where the other form is gone), the stream opens as that flavour's replica
// at a file/offset position (MySQL runs with GTIDs on: its GTID events must pass through), and row
// events decode to the right values, also with MySQL's default binlog_row_metadata=MINIMAL (no
// column names: mapped by position), unsigned and NULL values included.
func TestStreamDecodesOnEveryFlavour(t *testing.T) {
	for _, f := range sandbox.Flavours() {
		t.Run(string(f), func(t *testing.T) {
			s := sandboxtest.ForFlavour(t, f, sandbox.Options{})
			schema, db := sandboxtest.FreshDatabase(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var version, meta string
			if err := db.QueryRow("SELECT VERSION(), @@binlog_row_metadata").Scan(&version, &meta); err != nil {
				t.Fatal(err)
			}
			sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, u INT UNSIGNED, s VARCHAR(20), n INT NULL) ENGINE=MyISAM",
				"CREATE TABLE other (id INT PRIMARY KEY) ENGINE=InnoDB")
			start, err := CurrentPosition(ctx, db)
			if err != nil {
				t.Fatalf("%s: %v", version, err)
			}
			sandboxtest.MustExec(t, db, "INSERT INTO other VALUES (1)",
				"INSERT INTO t VALUES (1, 4000000000, 'a', NULL), (2, 7, 'b', 5)",
				"UPDATE t SET s = 'c', n = 6 WHERE id = 2", "DELETE FROM t WHERE id = 1")
			end, err := CurrentPosition(ctx, db)
			if err != nil || end.Compare(start) <= 0 {
				t.Fatalf("position did not advance: %s -> %s (%v)", start, end, err)
			}
			st := openTestStream(ctx, t, s, db, schema, version, start)
			var got []string
			for st.Position().Compare(end) < 0 {
				it, err := st.Next(ctx)
				if err != nil {
					t.Fatalf("after %v: %v", got, err)
				}
				for _, c := range it.Changes {
					got = append(got, fmt.Sprintf("%s %v %v", c.Kind, c.Before, c.After))
				}
			}
			want := []string{"insert [] [1 4000000000 a <nil>]", "insert [] [2 7 b 5]",
				"update [2 7 b 5] [2 7 c 6]", "delete [1 4000000000 a <nil>] []"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s (binlog_row_metadata=%s):\n got %q\nwant %q", version, meta, got, want)
			}
			t.Logf("%s, binlog_row_metadata=%s: %s -> %s", version, meta, start, end)
		})
	}
}

// MySQL logs only the change of a JSON value when a session sets
// binlog_row_value_options=PARTIAL_JSON (InnoDB tables: a rollback's source). Replay writes whole
// rows, so the stream must stop with ErrPartialJSON rather than write a diff as the value.
func TestStreamStopsOnPartialJSON(t *testing.T) {
	s := sandboxtest.ForFlavour(t, sandbox.MySQL97, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, j JSON) ENGINE=InnoDB",
		`INSERT INTO t VALUES (1, '{"a": 1, "b": "a long enough value to be updated in place"}')`)
	start, err := CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"SET SESSION binlog_row_value_options = 'PARTIAL_JSON'", `UPDATE t SET j = JSON_SET(j, '$.a', 2) WHERE id = 1`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var version string
	db.QueryRow("SELECT VERSION()").Scan(&version)
	info, err := table.Load(ctx, db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	cfg := StreamConfig{Conn: dbconn.Config{Host: "127.0.0.1", Port: s.Port, User: "root", SSLMode: dbconn.SSLDisabled},
		Flavor: Flavor(version), ServerID: 4243, Table: info}
	st, err := OpenStream(ctx, cfg, start)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		it, err := st.Next(ctx)
		if errors.Is(err, ErrPartialJSON) {
			return
		}
		if err != nil {
			t.Fatalf("want ErrPartialJSON, got %v", err)
		}
		if len(it.Changes) > 0 {
			t.Fatalf("partial JSON update decoded as %v %v", it.Changes[0].Before, it.Changes[0].After)
		}
	}
}
