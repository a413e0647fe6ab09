package binlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// Replay into a target with a FULLTEXT index keeps every written row findable by a search. On
// MySQL one REPLACE of several rows that replaces an existing one loses the FULLTEXT entries of
// the rows it wrote before (table.SQL.OneRowUpserts): here a replayed batch inserts a row, edits
// five, inserts two more, and each of them must be found by its new word and none by its old one.
func TestReplayKeepsEveryRowSearchable(t *testing.T) {
	f, err := sandboxtest.Flavour()
	if err != nil {
		t.Fatal(err)
	}
	s := sandboxtest.ForFlavour(t, f, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ddl = "CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, body TEXT, FULLTEXT KEY ft (body)) ENGINE=%s DEFAULT CHARSET=utf8mb4"
	sandboxtest.MustExec(t, db, fmt.Sprintf(ddl, "t", "MyISAM"), fmt.Sprintf(ddl, "t_new", "InnoDB"))
	for id := 1; id <= 10; id++ {
		sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO t_new VALUES (%d, 'rainy story')", id))
	}
	info, err := table.Load(ctx, db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	q, err := table.NewSQL(info, "t_new")
	if err != nil {
		t.Fatal(err)
	}
	writer, err := dbconn.OpenRowWriter(ctx, dbconn.Config{Host: "127.0.0.1", Port: s.Port, User: "root", SSLMode: dbconn.SSLDisabled}, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	row := func(id int64, body string) []any { return []any{id, []byte(body)} }
	changes := []Change{{Kind: Insert, After: row(101, "sunny garden")}}
	for id := int64(1); id <= 5; id++ {
		changes = append(changes, Change{Kind: Update, Before: row(id, "rainy story"), After: row(id, "sunny garden")})
	}
	changes = append(changes, Change{Kind: Insert, After: row(102, "sunny garden")}, Change{Kind: Insert, After: row(103, "sunny garden")})
	_, commit, err := NewApplier(writer, q).Write(ctx, changes)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	for word, want := range map[string]int{"sunny": 8, "rainy": 5} {
		var found, stored int
		if err := db.QueryRow("SELECT COUNT(*) FROM t_new WHERE MATCH (body) AGAINST (? IN BOOLEAN MODE)", word).Scan(&found); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("SELECT COUNT(*) FROM t_new WHERE body LIKE ?", word+"%").Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if found != want || stored != want {
			t.Errorf("%q: %d rows hold it, a search finds %d (want %d)", word, stored, found, want)
		}
	}
}
