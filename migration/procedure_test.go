package migration

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/rollback"
)

// churnSchema is a MyISAM table written by a stored procedure that loops over short INSERT,
// UPDATE and DELETE statements, the way many MyISAM applications and batch jobs write. Its
// triggers count their firings in the writing session's user variables (so the count is exact
// per session and needs no second table, which MySQL's GTID consistency would refuse beside a
// table of the other engine), and BEFORE triggers mark each row.
func churnSchema(t *testing.T, db *sql.DB, schema string) {
	t.Helper()
	q := func(n string) string { return dbconn.QualifiedName(schema, n) }
	sandboxtest.MustExec(t, db,
		"CREATE TABLE "+q("t")+" (id INT PRIMARY KEY, v INT NOT NULL, w VARCHAR(40)) ENGINE=MyISAM",
		"INSERT INTO "+q("t")+" SELECT seq, seq, CONCAT('seed:', seq) FROM "+sandboxtest.Seq(20000),
		"CREATE TRIGGER "+q("t_bi")+" BEFORE INSERT ON "+q("t")+" FOR EACH ROW SET NEW.w = CONCAT('bi:', NEW.v)",
		"CREATE TRIGGER "+q("t_bu")+" BEFORE UPDATE ON "+q("t")+" FOR EACH ROW SET NEW.w = CONCAT('bu:', NEW.v)",
		"CREATE TRIGGER "+q("t_ai")+" AFTER INSERT ON "+q("t")+" FOR EACH ROW SET @ai = @ai + 1",
		"CREATE TRIGGER "+q("t_au")+" AFTER UPDATE ON "+q("t")+" FOR EACH ROW SET @au = @au + 1",
		"CREATE TRIGGER "+q("t_bd")+" BEFORE DELETE ON "+q("t")+" FOR EACH ROW SET @bd = @bd + 1",
		"CREATE TABLE "+q("churn_stop")+" (stop INT NOT NULL) ENGINE=MyISAM",
		"INSERT INTO "+q("churn_stop")+" VALUES (0)",
		`CREATE PROCEDURE `+q("churn")+`(IN base INT, OUT i INT, OUT ins INT, OUT upd INT, OUT del INT)
		BEGIN DECLARE seen INT; SET i = 0, ins = 0, upd = 0, del = 0;
		WHILE (SELECT stop FROM churn_stop) = 0 DO
			INSERT INTO t (id, v) VALUES (base + i, i); SET ins = ins + ROW_COUNT();
			UPDATE t SET v = v + 1 WHERE id = base + i; SET upd = upd + ROW_COUNT();
			IF i >= 2 THEN DELETE FROM t WHERE id = base + i - 2; SET del = del + ROW_COUNT(); END IF;
			SELECT COUNT(*) INTO seen FROM t WHERE id = base + i AND SLEEP(0.004) = 0;
			SET i = i + 1;
		END WHILE; END`)
}

// churner is one application session running one CALL churn(...) until the test stops it: one
// CALL for the whole conversion. Each iteration inserts a row, updates it, deletes the one two
// before, and reads the new one for 4 ms (which keeps the write rate one a busy test machine's
// replay keeps up with, and puts the table's name in the process list nearly all the time), so
// the CALL leaves its last two rows.
type churner struct {
	conn                *sql.Conn
	base, n             int
	ins, upd, del       int64
	took                time.Duration
	err                 error
	firedI, firedU, fdD int64
}

func (c *churner) run() {
	ctx := context.Background()
	if _, c.err = c.conn.ExecContext(ctx, "SET @ai = 0, @au = 0, @bd = 0"); c.err != nil {
		return
	}
	start := time.Now()
	if _, err := c.conn.ExecContext(ctx, "CALL churn(?, @n, @i, @u, @d)", c.base); err != nil {
		c.err = fmt.Errorf("CALL churn(%d): %w", c.base, err)
		return
	}
	c.took = time.Since(start)
	c.err = c.conn.QueryRowContext(ctx, "SELECT @n, @i, @u, @d, @ai, @au, @bd").Scan(&c.n, &c.ins, &c.upd, &c.del, &c.firedI, &c.firedU, &c.fdD)
}

func startChurners(t *testing.T, db *sql.DB, schema string, n int) ([]*churner, func()) {
	var wg sync.WaitGroup
	var cs []*churner
	for i := 0; i < n; i++ {
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c := &churner{conn: conn, base: 1_000_000 * (i + 1)}
		cs = append(cs, c)
		wg.Add(1)
		go func() { defer wg.Done(); c.run() }()
	}
	var once sync.Once
	return cs, func() {
		once.Do(func() { db.Exec("UPDATE " + dbconn.QualifiedName(schema, "churn_stop") + " SET stop = 1") })
		wg.Wait()
		for _, c := range cs {
			c.conn.Close()
		}
	}
}

// check compares every session's trigger firings with its acknowledged statements, and the table
// with the rows the acknowledged CALLs left.
func (c *churner) check(t *testing.T, db *sql.DB, schema string) {
	t.Helper()
	if c.err != nil {
		t.Fatalf("application session: %v", c.err)
	}
	if c.firedI != c.ins || c.firedU != c.upd || c.fdD != c.del {
		t.Errorf("triggers fired %d/%d/%d times for %d inserts, %d updates, %d deletes", c.firedI, c.firedU, c.fdD, c.ins, c.upd, c.del)
	}
	want := map[int]int{c.base + c.n - 2: c.n - 1, c.base + c.n - 1: c.n}
	rows, err := db.Query("SELECT id, v, w FROM "+dbconn.QualifiedName(schema, "t")+" WHERE id >= ? AND id < ?", c.base, c.base+1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var id, v int
		var w string
		rows.Scan(&id, &v, &w)
		if wv, ok := want[id]; !ok || wv != v || w != fmt.Sprintf("bu:%d", v) {
			t.Errorf("row %d = (%d, %q), want v %d (present %v) marked by the BEFORE UPDATE trigger", id, v, w, wv, ok)
		}
		got++
	}
	if got != len(want) {
		t.Errorf("%d rows in the session's range, want %d", got, len(want))
	}
}

// Two sessions each run one CALL churn(...) through apply and rollback of a table with triggers:
// the statements inside the CALLs are short, so the swap goes through both ways while the CALLs
// run (judged by the CALL's age it would wait, and give up), every acknowledged statement fired
// each trigger exactly once, and the table holds exactly what the CALLs left.
func TestApplyAndRollbackWhileProceduresWrite(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	churnSchema(t, sdb, schema)
	sdb.SetMaxOpenConns(10)
	cs, stop := startChurners(t, sdb, schema, 2)
	defer stop()
	time.Sleep(time.Second)
	opts := testOptions(srv, schema, "t")
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("apply: %d cut-over attempt(s), lock held %s", res.Cutover.Attempts, res.Cutover.LockHeld)
	time.Sleep(500 * time.Millisecond)
	if _, err := rollback.Run(context.Background(), db, rollback.Options{Conn: opts.Conn, Schema: schema, Table: "t", StateSchema: opts.StateSchema,
		Logger: opts.Logger}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	if e := engineOf(t, db, schema, "t"); e != "MyISAM" {
		t.Fatalf("t is %s after rollback", e)
	}
	for i, c := range cs {
		c.check(t, db, schema)
		t.Logf("session %d: one CALL of %s, %d inserts, %d updates, %d deletes, each fired its triggers once",
			i, c.took.Round(time.Millisecond), c.ins, c.upd, c.del)
		if c.n < 100 {
			t.Errorf("session %d: %d iterations: the CALL did not write through the conversion", i, c.n)
		}
	}
}
