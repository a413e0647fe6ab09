package plan

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// serverState is what plan must leave unchanged: every table's definition, size, timestamps and
// AUTO_INCREMENT, every global variable, the binlog position and each MyISAM table's checksum.
func serverState(t *testing.T, db *sql.DB, schema string) map[string]string {
	t.Helper()
	state := map[string]string{}
	digest := func(name, query string) {
		rows, err := db.Query(query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		h := sha256.New()
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(h, vals)
			n++
		}
		state[name] = fmt.Sprintf("%d rows %x", n, h.Sum(nil))
	}
	digest("tables", `SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE, TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH, AUTO_INCREMENT,
		CREATE_TIME, UPDATE_TIME, CHECK_TIME, CREATE_OPTIONS, TABLE_COMMENT FROM information_schema.TABLES
		WHERE TABLE_SCHEMA NOT IN ('information_schema', 'performance_schema') ORDER BY 1, 2`)
	digest("variables", "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES ORDER BY 1")
	digest("binlog", "SHOW MASTER STATUS")
	digest("checksums", "CHECKSUM TABLE `"+schema+"`.t1, `"+schema+"`.t2 EXTENDED")
	digest("triggers", "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, ACTION_STATEMENT FROM information_schema.TRIGGERS ORDER BY 1, 2")
	return state
}

// TestPlanIsReadOnly proves that plan, test-compile included, changes nothing on the server:
// not a table, not a variable, not a byte of binlog (the test-compile session sets
// sql_log_bin=0 when the account may, as root may here).
func TestPlanIsReadOnly(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE t1 (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20), KEY (v)) ENGINE=MyISAM",
		"CREATE TABLE t2 (a INT NOT NULL, b INT NOT NULL AUTO_INCREMENT, c TEXT, PRIMARY KEY (a, b), FULLTEXT KEY (c)) ENGINE=MyISAM",
		"INSERT INTO t1 (v) SELECT CONCAT('v', seq) FROM seq_1_to_5000",
		"CREATE TRIGGER t1_bi BEFORE INSERT ON t1 FOR EACH ROW SET NEW.v = UPPER(NEW.v)",
		"FLUSH TABLES")
	before := serverState(t, db, schema)
	p := inspect(t, db, Options{Databases: []string{schema}, TestCompile: true})
	if len(p.Tables) != 2 || p.Server.TestCompileBinlogged {
		t.Fatalf("expected 2 tables planned with an unlogged test-compile, got %d tables, binlogged=%v", len(p.Tables), p.Server.TestCompileBinlogged)
	}
	// The compile did run and refuse t2 (AUTO_INCREMENT not leading), so the test proves the
	// scratch table came and went without trace.
	t2, _ := p.Table(schema, "t2")
	if f, _ := hasCheck(t2.Findings, "autoinc-not-leading"); f.Severity != Blocker {
		t.Fatalf("t2 findings %+v", t2.Findings)
	}
	after := serverState(t, db, schema)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed during plan: %s -> %s", k, v, after[k])
		}
	}
	// Connections plan used with sql_log_bin=0 must not go back to the caller's pool.
	for i := 0; i < 4; i++ {
		var logBin int
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conn.QueryRowContext(context.Background(), "SELECT @@session.sql_log_bin").Scan(&logBin)
		defer conn.Close()
		if logBin != 1 {
			t.Fatalf("a pooled connection has sql_log_bin=%d after plan", logBin)
		}
	}
}
