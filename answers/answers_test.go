package answers_test

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

var srv *sandbox.Server

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Main(m, sandbox.Options{}, func(s *sandbox.Server) { srv = s }))
}

// legacy builds a legacy application's tables: articles with FULLTEXT over ordinary words (one,
// "database", in every row), and events whose first rows were deleted and whose new rows took
// their places in the data file (fixed-length rows reuse the holes), so that the file no longer
// follows the key.
func legacy(t *testing.T) (schema string) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE articles (id INT PRIMARY KEY, title VARCHAR(100), body TEXT, FULLTEXT (title, body)) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4",
		`INSERT INTO articles SELECT seq, CONCAT('title ', ELT(1 + seq % 5, 'river', 'mountain', 'forest', 'desert', 'ocean')),
			CONCAT('database ', ELT(1 + seq % 7, 'would', 'through', 'cat dog', 'because', 'however', 'sunny', 'rainy'), ' ',
				ELT(1 + seq % 3, 'alpha', 'beta', 'gamma'), ' record', seq) FROM `+sandboxtest.Seq(5000),
		"CREATE TABLE events (id INT PRIMARY KEY, kind INT NOT NULL, note CHAR(20), KEY (kind)) ENGINE=MyISAM",
		"INSERT INTO events SELECT seq, seq % 6, CONCAT('note ', seq) FROM "+sandboxtest.Seq(1000),
		"DELETE FROM events WHERE id <= 100",
		"INSERT INTO events VALUES (2003, 7, 'late'), (2001, 7, 'early'), (2002, 7, 'middle')",
		"INSERT INTO events SELECT 1000 + seq, seq % 6, CONCAT('again ', seq) FROM "+sandboxtest.Seq(100))
	return schema
}

// Each statement whose answer changes with the engine is named, with its cause; none whose
// answer stays is. Compared with a plain ALTER's InnoDB table (native) the stopword and short-word
// searches change; with apply's FULLTEXT indexes, which ignore MyISAM's stopwords (the words of
// the table MyISAM ignores, short ones included), they answer the same.
func TestCheckNamesEveryStatementWhoseAnswerChanges(t *testing.T) {
	schema := legacy(t)
	db, err := srv.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	type want struct{ stmt, native, aligned string } // the cause; "": the same answer
	cases := map[string][]want{
		"articles": {
			{"SELECT id FROM articles WHERE MATCH (title, body) AGAINST ('database')", answers.CauseThreshold, answers.CauseThreshold},
			{"SELECT id FROM articles WHERE MATCH (title, body) AGAINST ('would')", answers.CauseStopword, ""},
			{"SELECT id FROM articles WHERE MATCH (title, body) AGAINST ('however' IN BOOLEAN MODE)", answers.CauseStopword, ""},
			{"SELECT id FROM articles WHERE MATCH (title, body) AGAINST ('cat')", answers.CauseTokenSize, ""},
			{"SELECT COUNT(*) FROM articles WHERE MATCH (title, body) AGAINST ('+database -cat' IN BOOLEAN MODE)", answers.CauseTokenSize, ""},
			{"SELECT id FROM articles WHERE MATCH (title, body) AGAINST ('+sunny' IN BOOLEAN MODE) ORDER BY id", "", ""},
			{"SELECT title FROM articles WHERE id = 42", "", ""},
		},
		"events": {
			{"SELECT id, note FROM events WHERE kind = 3 LIMIT 5", answers.CauseLimitNoOrder, answers.CauseLimitNoOrder},
			{"SELECT id, note FROM events WHERE kind = 7 LIMIT 5", answers.CauseLimitNoOrder, answers.CauseLimitNoOrder}, // all three rows, in another order
			{"SELECT id, note FROM events WHERE kind = 3 ORDER BY id LIMIT 5", "", ""},
			{"SELECT COUNT(*) FROM events", "", ""},
			{"SELECT note FROM events WHERE id = 420", "", ""},
			{"UPDATE events SET note = 'x' WHERE id = 1", "", ""},
		},
	}
	for _, native := range []bool{true, false} {
		for _, tbl := range []string{"articles", "events"} {
			p, err := answers.BuildPair(ctx, db, "_enginemig_answers_test", schema, tbl, 0, !native)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Drop(context.Background(), db)
			var stmts []string
			for _, w := range cases[tbl] {
				stmts = append(stmts, w.stmt)
			}
			rep, err := answers.Check(ctx, db, p, schema, tbl, stmts, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range rep.Findings {
				w, cause := cases[tbl][i], cases[tbl][i].aligned
				if native {
					cause = w.native
				}
				var codes []string
				for _, c := range f.Causes {
					codes = append(codes, c.Code)
				}
				sort.Strings(codes)
				t.Logf("native %v: %s: differs %v (%s; %d vs %d rows) %v %s", native, w.stmt, f.Differs, f.Kind, f.MyISAMRows, f.InnoDBRows, codes, f.Skipped)
				switch {
				case cause == "" && f.Differs:
					t.Errorf("native %v: %s: named as changing (%v), but its answer stays", native, w.stmt, f.Causes)
				case cause != "" && !f.Differs:
					t.Errorf("native %v: %s: not named, but its answer changes (%s)", native, w.stmt, cause)
				case cause != "" && !strings.Contains(strings.Join(codes, " "), cause):
					t.Errorf("native %v: %s: causes %v, want %s", native, w.stmt, codes, cause)
				}
			}
		}
	}
}
