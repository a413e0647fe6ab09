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
