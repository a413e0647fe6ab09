package verify_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/shadow/verify"
)

// The table of most tests: ids 2, 4, ... 2000, so that a key between two source rows can be
// added to the target; chunks of 100 rows end at ids 200, 400, ... 2000, and an eleventh, empty
// in the source, reads on from 2000 to the end.
const (
	tableDDL = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL, f FLOAT NOT NULL, d DATETIME NULL, " +
		"b BLOB NULL, c CHAR(8) NOT NULL) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
	tableRows   = 1000
	tableChunks = tableRows/chunkRows + 1
)

var tableCols = []string{"id", "v", "f", "d", "b", "c"}

// seed: v is NULL where id % 6 = 0, d where id % 10 = 0, b where id % 8 = 0.
func seed() string {
	return "INSERT INTO t SELECT 2 * seq, IF(seq % 3 = 0, NULL, CONCAT('v', 2 * seq)), seq / 7, " +
		"IF(seq % 5 = 0, NULL, '2020-01-01' + INTERVAL seq MINUTE), IF(seq % 4 = 0, NULL, CONCAT(0x00ff, seq * 7919, 0x0a)), " +
		"LEFT(HEX(seq * 2654435761), 8) FROM " + sandboxtest.Seq(tableRows)
}

// differences are the ways a target row can differ from its source row that verification must
// see, each made by one statement on the target, with the chunk (1-based) it falls in.
var differences = []struct {
	name, stmt string
	chunk      int
}{
	{"changed value", "UPDATE _t_new SET v = 'changed' WHERE id = 500", 3},
	// Equal under the column's collation, different in bytes: the application would see it.
	{"changed case", "UPDATE _t_new SET v = UPPER(v) WHERE id = 502", 3},
	{"trailing space", "UPDATE _t_new SET v = CONCAT(v, ' ') WHERE id = 704", 4},
	{"NULL turned empty", "UPDATE _t_new SET v = '' WHERE id = 600", 3},
	{"value turned NULL", "UPDATE _t_new SET v = NULL WHERE id = 802", 5},
	{"float", "UPDATE _t_new SET f = f + 1 WHERE id = 900", 5},
	{"datetime second", "UPDATE _t_new SET d = d + INTERVAL 1 SECOND WHERE id = 1002", 6},
	{"blob byte", "UPDATE _t_new SET b = CONCAT(b, 0x00) WHERE id = 1102", 6},
	{"missing row", "DELETE FROM _t_new WHERE id = 1300", 7},
	{"extra row between two keys", "INSERT INTO _t_new (id, f, c) VALUES (1501, 0, 'x')", 8},
	{"extra row before the first key", "INSERT INTO _t_new (id, f, c) VALUES (-5, 0, 'x')", 1},
	{"extra row after the last key", "INSERT INTO _t_new (id, f, c) VALUES (5001, 0, 'x')", 11},
	{"first row", "UPDATE _t_new SET c = 'first' WHERE id = 2", 1},
	{"last row", "UPDATE _t_new SET c = 'last' WHERE id = 2000", 10},
	{"a chunk's last row", "UPDATE _t_new SET c = 'end' WHERE id = 1600", 8},
	{"the next chunk's first row", "UPDATE _t_new SET c = 'start' WHERE id = 1602", 9},
}

// modes are the four ways a chunk is compared: both sides under the source's lock, the target
// after the source is let go, both in the locked session (trigger capture's way), and the target
// stopped at a mark beside the source's checksum (binlog capture's way). cfg may set p's capture,
// and p's release forces the choice the first two make (faults.Hooks.VerifyRelease).
var modes = []struct {
	name string
	cfg  func(p *pair) verify.Config
}{
	{"source locked throughout", func(p *pair) verify.Config { p.release = faults.Never; return verify.Config{} }},
	{"source released early", func(p *pair) verify.Config { p.release = faults.Always; return verify.Config{} }},
	{"target locked with the source", func(p *pair) verify.Config {
		return verify.Config{LockWith: []string{p.target() + " WRITE"}}
	}},
	{"target marked", func(p *pair) verify.Config { p.capture = marked{}; return verify.Config{} }},
}

// Equal tables pass in every mode, chunk by chunk, with every row counted once.
func TestVerifyPassesEqualTables(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			p := newPair(t, tableDDL, seed())
			var rows atomic.Int64
			cfg := m.cfg(&p)
			cfg.Rows = &rows
			res, err := verifyPair(t, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Chunks != tableChunks || res.Rows != tableRows || rows.Load() != tableRows || res.Repaired != 0 {
				t.Errorf("result %+v, %d rows counted; want %d chunks, %d rows, none repaired", res, rows.Load(), tableChunks, tableRows)
			}
			// Where the time went: each part measured, and together no more than the whole.
			if parts := res.LockWait + res.LockTime + res.AfterRelease; res.LockWait <= 0 || res.LockTime <= 0 || res.AfterRelease <= 0 || parts > res.Duration {
				t.Errorf("lock wait %s, held %s, after release %s (sum %s), duration %s: want each > 0, the sum within the duration",
					res.LockWait, res.LockTime, res.AfterRelease, parts, res.Duration)
			}
		})
	}
}

// Each kind of difference is found and repaired, in the chunk it falls in; afterwards the target
// equals the source and a second verification finds nothing. The modes take turns.
func TestVerifyFindsAndRepairsEachDifference(t *testing.T) {
	for i, d := range differences {
		m := modes[i%len(modes)]
		t.Run(d.name+", "+m.name, func(t *testing.T) {
			p := newPair(t, tableDDL, seed())
			exec(t, p.control, strings.ReplaceAll(d.stmt, "_t_new", p.target()))
			cfg := m.cfg(&p) // before p is passed: it may set p's capture and release
			res, err := verifyPair(t, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Repaired != 1 {
				t.Fatalf("%d chunks repaired, want 1 (%+v)", res.Repaired, res)
			}
			assertRepaired(t, p, m.cfg(&p))
		})
	}
}

// With every difference at once, exactly the chunks holding one are repaired: ranges end where
// the walk says, and the ends of the table are covered.
func TestVerifyRepairsOnlyTheChunksThatDiffer(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			p := newPair(t, tableDDL, seed())
			chunks := map[int]bool{}
			for _, d := range differences {
				exec(t, p.control, strings.ReplaceAll(d.stmt, "_t_new", p.target()))
				chunks[d.chunk] = true
			}
			cfg := m.cfg(&p) // before p is passed: it may set p's capture and release
			res, err := verifyPair(t, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Chunks != tableChunks || res.Repaired != len(chunks) {
				t.Fatalf("%d chunks, %d repaired; want %d, %d", res.Chunks, res.Repaired, tableChunks, len(chunks))
			}
			assertRepaired(t, p, m.cfg(&p))
		})
	}
}

// A composite key whose first column repeats across a chunk boundary: the rows on both sides of
// the boundary are compared and repaired in their own chunks, none twice and none skipped.
func TestVerifyCompositeKeyAcrossAChunkBoundary(t *testing.T) {
	// Rows in key order: g 0 holds 6 (n1..n6), each later g 7, so the first chunk's 100th row is
	// (14, 'n2') and g 14 lies on both sides of the boundary.
	p := newPair(t, "CREATE TABLE t (g INT NOT NULL, name VARCHAR(10) NOT NULL, v INT NOT NULL, PRIMARY KEY (g, name)) ENGINE=MyISAM",
		"INSERT INTO t SELECT seq DIV 7, CONCAT('n', seq % 7), seq FROM "+sandboxtest.Seq(tableRows))
	exec(t, p.control,
		"UPDATE "+p.target()+" SET v = -v WHERE g = 14",
		"DELETE FROM "+p.target()+" WHERE g = 14 AND name = 'n3'",
		"INSERT INTO "+p.target()+" VALUES (14, 'n2a', 0)")
	res, err := verifyPair(t, p, verify.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Repaired != 2 || res.Rows != tableRows {
		t.Fatalf("%d chunks repaired, %d rows compared; want 2 (both sides of the boundary), %d (%+v)", res.Repaired, res.Rows, tableRows, res)
	}
	if n := differing(t, p, []string{"g", "name", "v"}); n != 0 {
		t.Fatalf("%d rows still differ after the repair", n)
	}
}

// A difference that recopying cannot remove (a trigger on the target rewrites the row) ends
// verification with ErrMismatch naming the range, after a bounded number of recopies.
func TestVerifyGivesUpOnADifferenceItCannotRepair(t *testing.T) {
	p := newPair(t, tableDDL, seed())
	exec(t, p.control,
		"CREATE TRIGGER "+dbconn.QualifiedName(p.schema, "spoil")+" BEFORE INSERT ON "+p.target()+" FOR EACH ROW SET NEW.c = 'spoilt'",
		"UPDATE "+p.target()+" SET c = 'spoilt' WHERE id = 1000")
	res, err := verifyPair(t, p, verify.Config{})
	if !errors.Is(err, verify.ErrMismatch) {
		t.Fatalf("verification returned %v (%+v), want %v", err, res, verify.ErrMismatch)
	}
	if !strings.Contains(err.Error(), "[800]..[1000]") {
		t.Errorf("the error does not name the range (800, 1000]: %v", err)
	}
}

// With NoRepair (a Galera node) a difference ends verification at once with ErrMismatch, and the
// target is left as it was: nothing writes it under a table lock.
func TestVerifyWithoutRepairFailsAndWritesNothing(t *testing.T) {
	p := newPair(t, tableDDL, seed())
	exec(t, p.control, "UPDATE "+p.target()+" SET c = 'spoilt' WHERE id = 1000")
	res, err := verifyPair(t, p, verify.Config{NoRepair: true})
	if !errors.Is(err, verify.ErrMismatch) || res.Repaired != 0 {
		t.Fatalf("verification returned %v (%+v), want %v with nothing repaired", err, res, verify.ErrMismatch)
	}
	var c string
	if err := p.control.QueryRow("SELECT c FROM " + p.target() + " WHERE id = 1000").Scan(&c); err != nil || c != "spoilt" {
		t.Fatalf("the target's row holds %q (%v): it was written", c, err)
	}
}

// assertRepaired checks that the target now equals the source, compared row by row here, and
// that verification agrees.
func assertRepaired(t *testing.T, p pair, cfg verify.Config) {
	t.Helper()
	if n := differing(t, p, tableCols); n != 0 {
		t.Fatalf("%d rows still differ after the repair", n)
	}
	res, err := verifyPair(t, p, cfg)
	if err != nil || res.Repaired != 0 {
		t.Fatalf("verifying again: %v, %+v; want nothing to repair", err, res)
	}
}

// differing counts the rows of source and target without an identical row, value and bytes, on
// the other side.
func differing(t *testing.T, p pair, cols []string) int {
	t.Helper()
	var on []string
	for _, c := range cols {
		q := dbconn.QuoteIdent(c)
		on = append(on, fmt.Sprintf("x.%s <=> y.%s AND CAST(x.%s AS BINARY) <=> CAST(y.%s AS BINARY)", q, q, q, q))
	}
	key := dbconn.QuoteIdent(cols[0])
	n := 0
	for _, side := range [][2]string{{p.source(), p.target()}, {p.target(), p.source()}} {
		var k int
		q := "SELECT COUNT(*) FROM " + side[0] + " x LEFT JOIN " + side[1] + " y ON " + strings.Join(on, " AND ") + " WHERE y." + key + " IS NULL"
		if err := p.control.QueryRow(q).Scan(&k); err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

// lagging is a target whose catch-up under the source's lock outlasts every wait for its first
// slow calls (a backlog bigger than the wait, as a rollback's trigger capture under transactional
// writers had), and is instant after them; waiting with the source unlocked always succeeds.
type lagging struct {
	still
	slow  int64
	calls atomic.Int64
}

func (l *lagging) WaitFor(ctx context.Context, _ *sql.Conn) error {
	if l.calls.Add(1) <= l.slow {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (l *lagging) WaitUnlocked(context.Context, *sql.Conn) error { return nil }

// A target still behind after the chunk's short waits gets more than one wait of CatchUp, each
// with the source let go after it, before verification gives up: five waits that all run out
// (three of the chunk's patience, two of CatchUp) and the sixth succeeds. A target that never
// catches up still ends verification after those six, saying so.
func TestVerifyGivesTheTargetMoreThanOneLateChance(t *testing.T) {
	p := newPair(t, tableDDL, seed())
	cfg := verify.Config{LockWith: []string{p.target() + " WRITE"}, CatchUp: 30 * time.Millisecond}
	late := &lagging{slow: 5}
	p.capture = late
	res, err := verifyPair(t, p, cfg)
	if err != nil || res.BehindRetries != 5 || res.Rows != tableRows {
		t.Fatalf("verification with a target behind for 5 waits: %v, %+v; want it to pass after 5 retries behind", err, res)
	}
	never := &lagging{slow: math.MaxInt64}
	p.capture = never
	_, err = verifyPair(t, p, cfg)
	if err == nil || !strings.Contains(err.Error(), "did not catch up within 30ms") || never.calls.Load() != 6 {
		t.Fatalf("verification with a target that never catches up: %v after %d waits; want it to fail saying so after 6", err, never.calls.Load())
	}
}

// A sample (Config.Sample) compares whole chunks from the table's start until the next would pass
// its rows, and never the step that reads to the end of the table, which during the copy holds
// rows not copied yet: with chunks of 100 rows, 350 rows compare three chunks, and a bound of
// every row compares the ten closed ones.
func TestVerifySampleStopsWithinItsRows(t *testing.T) {
	for _, c := range []struct {
		rows         int64
		chunks, want int
	}{{350, 3, 300}, {math.MaxInt64 / 2, tableChunks - 1, tableRows}} {
		t.Run(fmt.Sprint(c.rows), func(t *testing.T) {
			p := newPair(t, tableDDL, seed())
			res, err := verifyPair(t, p, verify.Config{Sample: &verify.Sample{Rows: c.rows, Budget: time.Minute}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Chunks != c.chunks || res.Rows != int64(c.want) {
				t.Errorf("sampled %d chunks, %d rows; want %d, %d", res.Chunks, res.Rows, c.chunks, c.want)
			}
		})
	}
}
