package verify_test

import (
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/shadow/verify"
)

// A repaired chunk of a table with a FULLTEXT index stays searchable: the repair writes rows the
// target already has, which on MySQL, in one statement, loses the FULLTEXT entries of all but the
// last of them (table.SQL.OneRowUpserts). Three rows of a chunk are changed on the target; after
// the repair every row is found by the word it holds on the source, none by the target's word.
func TestRepairKeepsEveryRowSearchable(t *testing.T) {
	p := newPair(t, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL, FULLTEXT KEY ft (v)) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4",
		"INSERT INTO t SELECT seq, 'rainy story' FROM "+sandboxtest.Seq(300))
	exec(t, p.control, "UPDATE "+p.target()+" SET v = 'sunny garden' WHERE id IN (120, 150, 180)")
	p.release = faults.Never
	res, err := verifyPair(t, p, verify.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Repaired != 1 {
		t.Fatalf("%d chunks repaired, want 1 (%+v)", res.Repaired, res)
	}
	for word, want := range map[string]int{"rainy": 300, "sunny": 0} {
		var n int
		if err := p.control.QueryRow("SELECT COUNT(*) FROM "+p.target()+" WHERE MATCH (v) AGAINST (? IN BOOLEAN MODE)", word).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("a search for %q finds %d rows of the repaired target, want %d", word, n, want)
		}
	}
}
