package plan

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// The copy estimate assumes what apply will do (ParallelCopy): two chunks at once, at the smaller
// ratio, for a table without AUTO_INCREMENT; with one, one chunk at a time on MariaDB, and two on
// MySQL, whose default innodb_autoinc_lock_mode is 2. plan and apply's own estimate agree.
func TestCopyEstimateFollowsParallelCopy(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE plain (id INT NOT NULL PRIMARY KEY, v INT NOT NULL) ENGINE=MyISAM",
		"INSERT INTO plain SELECT seq, seq FROM "+sandboxtest.Seq(5000),
		"CREATE TABLE counted (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL) ENGINE=MyISAM",
		"INSERT INTO counted SELECT seq, seq FROM "+sandboxtest.Seq(5000))
	p := inspect(t, db, Options{Databases: []string{schema}})
	for _, c := range []struct {
		table    string
		parallel bool
	}{{"plain", true}, {"counted", srv.Flavour().MySQL()}} {
		tp, ok := p.Table(schema, c.table)
		if !ok {
			t.Fatalf("%s not planned", c.table)
		}
		own, err := EstimateTable(context.Background(), db, schema, c.table, 0)
		if err != nil {
			t.Fatal(err)
		}
		ratio, how := copyReadRatio, "one chunk at a time"
		if c.parallel {
			ratio, how = copyReadRatioParallel, "two chunks at a time"
		}
		for name, e := range map[string]Estimate{"plan": tp.Estimate, "apply's": own} {
			read := e.SampleSeconds / float64(e.SampleRows) * float64(e.Rows)
			if e.ParallelCopy != c.parallel || !strings.Contains(e.Basis, how) || math.Abs(e.CopySeconds/read-ratio) > 1e-6 {
				t.Errorf("%s: %s estimate assumes parallel %v at x%.2f (%s), want %v at x%.1f",
					c.table, name, e.ParallelCopy, e.CopySeconds/read, e.Basis, c.parallel, ratio)
			}
		}
	}
}
