package migration

import (
	"context"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Apply checks the answers of the application's reads, taken from the server's statement
// history, before it creates anything: a statement whose answer changes stops it (exit 5, the
// table untouched, no shadow), and once its digest is accepted the same apply converts. A server
// of its own: the statement history is a global setting.
func TestApplyStopsWhenAnAnswerChanges(t *testing.T) {
	s := sandboxtest.ForTest(t, sandbox.Options{})
	schema, sdb := sandboxtest.FreshDatabase(t, s)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE events (id INT PRIMARY KEY, kind INT NOT NULL, note CHAR(20), KEY (kind)) ENGINE=MyISAM",
		"INSERT INTO events SELECT seq, seq % 6, CONCAT('note ', seq) FROM "+sandboxtest.Seq(600),
		"DELETE FROM events WHERE id <= 60",
		"INSERT INTO events SELECT 1000 + seq, seq % 6, CONCAT('again ', seq) FROM "+sandboxtest.Seq(60),
		"UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')")
	changing := "SELECT id, note FROM events WHERE kind = 3 LIMIT 5"
	sandboxtest.MustExec(t, sdb, changing, "SELECT id, note FROM events WHERE kind = 3 ORDER BY id LIMIT 5", "SELECT note FROM events WHERE id = 99")
	db := openControl(t, s)
	opts := testOptions(s, schema, "events")
	_, err := Run(context.Background(), db, opts)
	if outcome.CodeOf(err) != outcome.GateFailed || err == nil || !strings.Contains(err.Error(), changing) || strings.Count(err.Error(), "why [") != 1 {
		t.Fatalf("want exit 5 naming %q alone, got exit %d: %v", changing, outcome.CodeOf(err), err)
	}
	if e := engineOf(t, db, schema, "events"); e != "MyISAM" || tableExists(t, db, schema, "_events_new") {
		t.Fatalf("a stopped apply must change nothing: events is %s, shadow there %v", e, tableExists(t, db, schema, "_events_new"))
	}
	opts.Answers.Accepted = map[string]bool{answers.Digest(changing): true}
	res, err := Run(context.Background(), db, opts)
	if err != nil {
		t.Fatalf("apply with the statement accepted: %v", err)
	}
	if e := engineOf(t, db, schema, "events"); e != "InnoDB" || res.Answers == nil || len(res.Answers.Findings) != 3 {
		t.Fatalf("want events converted after a check of 3 statements, got %s and %+v", e, res.Answers)
	}
}

// A converted FULLTEXT table answers searches for MyISAM's stopwords and short words as MyISAM
// did: apply builds its FULLTEXT index with them (apply's defaults).
func TestFulltextKeepsMyISAMStopwords(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, sdb, "CREATE TABLE articles (id INT PRIMARY KEY, body TEXT, FULLTEXT (body)) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4",
		"INSERT INTO articles SELECT seq, CONCAT('story ', ELT(1 + seq % 5, 'would', 'through', 'cat dog', 'however', 'sunny'), ' word', seq) FROM "+sandboxtest.Seq(3000))
	searches := []string{"would", "however", "cat", "sunny", "dog", "+story -cat"}
	counts := func() []int {
		var out []int
		for _, s := range searches {
			var n int
			if err := sdb.QueryRow("SELECT COUNT(*) FROM articles WHERE MATCH (body) AGAINST (? IN BOOLEAN MODE)", s).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	before := counts()
	if _, err := Run(context.Background(), openControl(t, srv), testOptions(srv, schema, "articles")); err != nil {
		t.Fatal(err)
	}
	after := counts()
	for i, s := range searches {
		if before[i] != after[i] {
			t.Errorf("search %q: %d rows on MyISAM, %d on InnoDB", s, before[i], after[i])
		}
	}
	if e := engineOf(t, sdb, schema, "articles"); e != "InnoDB" || before[3] == 0 {
		t.Fatalf("articles is %s, 'sunny' found %d rows: the test proves nothing", e, before[3])
	}
}
