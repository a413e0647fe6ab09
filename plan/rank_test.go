package plan

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// TestRankingByLockWaits makes a small table wait on its table lock (an UPDATE queued behind a
// slow SELECT, as in production) and expects it ranked above a bigger, quiet table; a database
// where nothing waited is ranked by size instead.
func TestRankingByLockWaits(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE big (id INT PRIMARY KEY, pad CHAR(100) NOT NULL) ENGINE=MyISAM",
		"INSERT INTO big SELECT seq, 'x' FROM seq_1_to_20000",
		"CREATE TABLE hot (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=MyISAM",
		"INSERT INTO hot SELECT seq, 0 FROM seq_1_to_10")
	ctx := context.Background()
	reader, _ := db.Conn(ctx)
	defer reader.Close()
	done := make(chan error, 1)
	go func() {
		// Holds hot's read lock for ~0.5 s: SLEEP per row.
		_, err := reader.ExecContext(ctx, "SELECT SUM(SLEEP(0.05)) FROM hot")
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	sandboxtest.MustExec(t, db, "UPDATE hot SET v = v + 1 WHERE id = 1")
	waited := time.Since(start)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited < 200*time.Millisecond {
		t.Fatalf("the UPDATE did not wait for the lock (%s): the test would prove nothing", waited)
	}

	p := inspect(t, db, Options{Databases: []string{schema}})
	if p.RankedBy != RankByLockWaits || len(p.Tables) != 2 || p.Tables[0].Table != "hot" || p.Tables[0].Rank != 1 {
		t.Fatalf("want hot first by lock waits, got %s: %+v", p.RankedBy, p.Tables)
	}
	if w := p.Tables[0].Contention.LockWaitSeconds; w < 0.15 {
		t.Fatalf("hot waited %.3fs according to plan, the UPDATE waited %s", w, waited)
	}
	if sts := p.Tables[0].Contention.Statements; len(sts) == 0 || !strings.HasPrefix(sts[0].Text, "UPDATE `hot` SET") || sts[0].LockWaitSeconds < 0.15 {
		t.Errorf("the waiting UPDATE is not named as the statement that waited: %+v", sts)
	}
	var text strings.Builder
	if err := WriteText(&text, p); err != nil || !strings.Contains(text.String(), "statements waiting for the table lock") {
		t.Errorf("plan text does not name the waiting statements (%v):\n%s", err, text.String())
	}
	if p.Tables[0].Contention.Updates == 0 {
		t.Errorf("row operation counts missing: %+v", p.Tables[0].Contention)
	}

	// Estimates: sizes and a duration measured from a real sample.
	big, _ := p.Table(schema, "big")
	e := big.Estimate
	if e.Rows != 20000 || e.ProjectedBytes <= e.DataBytes || e.ExtraDiskBytes <= e.ProjectedBytes || e.BinlogBytes == 0 {
		t.Errorf("sizes: %+v", e)
	}
	if e.SampleRows != DefaultSampleRows || e.SampleSeconds <= 0 || e.CopySeconds <= 0 || !strings.Contains(e.Basis, "rows by key") {
		t.Errorf("copy estimate not measured: %+v", e)
	}
	if p.Totals.Tables != 2 || p.Totals.ProjectedBytes != big.Estimate.ProjectedBytes+p.Tables[0].Estimate.ProjectedBytes {
		t.Errorf("totals: %+v", p.Totals)
	}

	quiet, qdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, qdb,
		"CREATE TABLE small (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE TABLE large (id INT PRIMARY KEY) ENGINE=MyISAM",
		"INSERT INTO large SELECT seq FROM seq_1_to_1000")
	q := inspect(t, qdb, Options{Databases: []string{quiet}})
	if q.RankedBy != RankBySize || q.Tables[0].Table != "large" {
		t.Fatalf("want size ranking with large first, got %s %+v", q.RankedBy, q.Tables)
	}
}
