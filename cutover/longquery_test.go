package cutover

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// statementsTimed turns performance_schema's events_statements_current consumer on or off for the
// test (MySQL has it on, MariaDB off by default) and puts it back afterwards.
func statementsTimed(t *testing.T, db *sql.DB, on bool) {
	t.Helper()
	var was string
	if err := db.QueryRow("SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'events_statements_current'").Scan(&was); err != nil {
		t.Fatal(err)
	}
	set := func(v string) {
		sandboxtest.MustExec(t, db, "UPDATE performance_schema.setup_consumers SET ENABLED = '"+v+"' WHERE NAME = 'events_statements_current'")
	}
	set(map[bool]string{true: "YES", false: "NO"}[on])
	t.Cleanup(func() { set(was) })
}

// longCase is a statement one session runs, and whether it counts as long on the table.
type longCase struct {
	name, stmt string
	want       bool
}

// Each session is judged by the statement that holds its locks: a procedure looping over short
// writes is not long however long its CALL runs; a report, a procedure's one long statement and a
// statement calling a slow function are. Read from performance_schema and from the process list.
// The process list shows a stored function's statement in place of the statement calling it (and
// MariaDB gives it its own age), so a statement calling a slow function is seen only through
// performance_schema.
func TestLongQueriesMeasurePerStatement(t *testing.T) {
	for _, mode := range []string{"performance_schema", "process list"} {
		t.Run(mode, func(t *testing.T) {
			schema, db := sandboxtest.FreshDatabase(t, srv)
			db.SetMaxOpenConns(20)
			timed := mode == "performance_schema"
			statementsTimed(t, db, timed)
			sandboxtest.MustExec(t, db,
				"CREATE TABLE orders (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
				"INSERT INTO orders SELECT seq, seq FROM "+sandboxtest.Seq(100),
				"CREATE TABLE other (id INT PRIMARY KEY) ENGINE=MyISAM",
				`CREATE PROCEDURE churn() BEGIN DECLARE i INT DEFAULT 0; WHILE i < 100000000 DO
					INSERT INTO orders VALUES (1000 + CONNECTION_ID() * 1000 + i % 100, i) ON DUPLICATE KEY UPDATE v = v + 1;
					UPDATE orders SET v = v + 1 WHERE id = 1 + i % 100; DELETE FROM orders WHERE id = 1000 + CONNECTION_ID() * 1000 + (i + 50) % 100;
					SET i = i + 1; END WHILE; END`,
				"CREATE PROCEDURE report() BEGIN SELECT COUNT(*) FROM orders WHERE SLEEP(0.05) = 0; END",
				`CREATE FUNCTION slowf(x INT) RETURNS INT READS SQL DATA BEGIN DECLARE i, r INT DEFAULT 0;
					WHILE i < 1000 DO SELECT COUNT(*) + SLEEP(0.005) INTO r FROM other; SET i = i + 1; END WHILE; RETURN x; END`)
			// Writers and readers of the table block each other, so they run in turn.
			judge(t, db, schema, []longCase{
				{"CALL of short writes", "CALL churn()", false},
				{"another CALL of short writes", "CALL churn()", false},
				{"another table", "SELECT COUNT(*) FROM other WHERE SLEEP(5) = 0", false},
			})
			// The long ones one at a time: three concurrent readers were sometimes judged wrong on
			// MariaDB 10.11 (some of them not long), not yet explained (docs/testing/captures-and-cutover.md).
			judge(t, db, schema, []longCase{{"report", "SELECT COUNT(*) FROM orders WHERE SLEEP(0.05) = 0", true}})
			judge(t, db, schema, []longCase{{"CALL of a report", "CALL report()", true}})
			judge(t, db, schema, []longCase{{"statement calling a slow function", "SELECT slowf(id) FROM orders WHERE id = 1", timed}})
		})
	}
}

// judge runs each case in a session of its own for 1.5 s (past the process list's whole second),
// then compares LongQueries with what each case wants.
func judge(t *testing.T, db *sql.DB, schema string, cases []longCase) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	names := map[int64]longCase{}
	var conns []*sql.Conn
	defer func() {
		for id := range names {
			db.Exec(fmt.Sprintf("KILL QUERY %d", id))
		}
		cancel()
		for _, c := range conns {
			c.Close()
		}
		// The next cases must not queue behind a killed writer that has not ended yet (MyISAM
		// lets a waiting writer go before later readers, which would then wait for a lock). A
		// case's session goes back to the pool and may ask this itself: it is not waited for.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var n int
			db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN (%s) AND COMMAND <> 'Sleep' AND ID <> CONNECTION_ID()", idList(names))).Scan(&n)
			if n == 0 {
				break
			}
		}
	}()
	for _, c := range cases {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		var id int64
		conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
		// Without the binlog's sync (MySQL's sync_binlog=1), a short write stays short on a busy
		// machine.
		conn.ExecContext(ctx, "SET SESSION sql_log_bin = 0")
		names[id] = c
		go conn.ExecContext(ctx, c.stmt)
	}
	time.Sleep(1500 * time.Millisecond)
	start := time.Now()
	found, err := LongQueries(ctx, db, schema, "orders", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: long %v, judged in %s", srv.Flavour(), found, time.Since(start).Round(time.Millisecond))
	for id, c := range names {
		if got := slices.Contains(found, id); got != c.want {
			t.Errorf("%s (connection %d): long = %v, want %v", c.name, id, got, c.want)
		}
	}
}

func idList(names map[int64]longCase) string {
	var ids []string
	for id := range names {
		ids = append(ids, fmt.Sprint(id))
	}
	if len(ids) == 0 {
		return "0"
	}
	return strings.Join(ids, ",")
}
