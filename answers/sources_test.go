package answers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// FromServer takes its examples from events_statements_history_long: where that consumer (or
// events_statements_current, which feeds it) is off it says so at once, with the statement that
// turns them on; once it has run, FromServer finds the application's statement on the table with its literals.
func TestFromServerTakesExamplesFromTheHistory(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	ctx := context.Background()
	off := func() {
		sandboxtest.MustExec(t, db, "UPDATE performance_schema.setup_consumers SET ENABLED = 'NO' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')")
	}
	off()
	t.Cleanup(off)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)", "SELECT v FROM t WHERE id = 3")
	const enable = "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')"
	_, err := answers.FromServer(ctx, db, schema, "t")
	if !errors.Is(err, answers.ErrNoExamples) || !strings.Contains(err.Error(), enable) {
		t.Fatalf("with the history off: %v; want ErrNoExamples saying %q", err, enable)
	}
	sandboxtest.MustExec(t, db, enable) // the remedy the error gives
	sandboxtest.MustExec(t, db, "SELECT v FROM t WHERE id = 3")
	got, err := answers.FromServer(ctx, db, schema, "t")
	if err != nil {
		t.Fatalf("with the history on: %v", err)
	}
	found := false
	for _, s := range got {
		found = found || strings.Contains(s, "id = 3")
	}
	if !found {
		t.Fatalf("with the history on: examples %q, want the SELECT of id 3", got)
	}
}

// Statements of one shape can answer differently: two FULLTEXT searches share a digest, one
// whose word is a stopword of MyISAM's and not of InnoDB's, one whose word is neither. FromServer
// returns each distinct literal the history keeps, so the check names the one that changes even
// when the other ran last (one example per shape, the newest, named nothing).
func TestFromServerChecksEveryLiteralOfAShape(t *testing.T) {
	schema := legacy(t)
	ctx := context.Background()
	db, err := srv.Open(schema)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	const enable = "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')"
	sandboxtest.MustExec(t, db, enable, "TRUNCATE performance_schema.events_statements_history_long")
	t.Cleanup(func() {
		db.Exec("UPDATE performance_schema.setup_consumers SET ENABLED = 'NO' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')")
	})
	changes := "SELECT id FROM articles WHERE MATCH (title, body) AGAINST ('however' IN BOOLEAN MODE) ORDER BY id"
	stays := "SELECT id FROM articles WHERE MATCH (title, body) AGAINST ('+sunny' IN BOOLEAN MODE) ORDER BY id"
	sandboxtest.MustExec(t, db, changes, stays, stays)
	got, err := answers.FromServer(ctx, db, schema, "articles")
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, s := range got {
		n[s]++
	}
	if n[changes] != 1 || n[stays] != 1 {
		t.Fatalf("examples %q: want each of the shape's two literals once", got)
	}
	rep, err := answers.Run(ctx, db, schema, "articles", got, answers.Options{Native: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Statement == changes && !f.Differs || f.Statement == stays && f.Differs {
			t.Errorf("%s: differs %v", f.Statement, f.Differs)
		}
	}
}
