package migration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/plan"
)

// ftWords are the words of the posts' text: MyISAM stopwords InnoDB's own list lacks (would,
// through, however), words shorter than MyISAM's ft_min_word_len that InnoDB indexes (cat, dog),
// a stopword of both (about) and ordinary words. Every one of them is in the rows when apply asks
// MyISAM for its stopwords, and each is in well under half of the rows, so that MyISAM's
// natural-language 50% threshold leaves its answers alone.
var ftWords = []string{"would", "through", "however", "cat", "dog", "about", "sunny", "rainy", "story", "forum", "winter", "garden"}

// ftSearches are compared between the converted table and the MyISAM reference.
var ftSearches = []string{"would", "however", "cat", "dog", "about", "sunny", "+story -cat", "+sunny +garden", "rain*", "winter would"}

const ftPostsDDL = "CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, author INT NOT NULL, subject VARCHAR(100) NOT NULL, body TEXT, " +
	"FULLTEXT KEY ft (subject, body)%s) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4"

// ftText is a subject or body of n words of ftWords.
func ftText(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = ftWords[r.IntN(len(ftWords))]
	}
	return strings.Join(w, " ")
}

// ftMix is a forum's writes: new posts, edits of a post's text, deletions and moved ids.
func ftMix(w *writer, ctx context.Context) {
	switch op := w.r.IntN(10); {
	case op < 4 && len(w.ids) > 0:
		id := w.ids[w.r.IntN(len(w.ids))]
		w.exec(ctx, "UPDATE {T} SET subject=?, body=? WHERE id=?", ftText(w.r, 1), ftText(w.r, 2), id)
	case op < 5 && len(w.ids) > 0:
		w.exec(ctx, "UPDATE {T} SET author=author+1 WHERE id=?", w.ids[w.r.IntN(len(w.ids))])
	case op < 8:
		w.next++
		if w.exec(ctx, "INSERT INTO {T} (id, author, subject, body) VALUES (?,?,?,?)", w.next, w.r.IntN(50), ftText(w.r, 1), ftText(w.r, 2)) {
			w.ids = append(w.ids, w.next)
		}
	case op < 9 && len(w.ids) > 0:
		i := w.r.IntN(len(w.ids))
		if w.exec(ctx, "DELETE FROM {T} WHERE id=?", w.ids[i]) {
			w.ids = append(w.ids[:i], w.ids[i+1:]...)
		}
	case len(w.ids) > 0:
		i := w.r.IntN(len(w.ids))
		w.next++
		if w.exec(ctx, "UPDATE {T} SET id=? WHERE id=?", w.next, w.ids[i]) {
			w.ids[i] = w.next
		}
	}
}

// seedPosts creates t and its MyISAM reference ref with extra index definitions, rows posts each,
// and writers running ftMix.
func seedPosts(extra string, rows, writers int) func(*testing.T, *sql.DB, string) []*writer {
	return func(t *testing.T, db *sql.DB, schema string) []*writer {
		t.Helper()
		for _, tbl := range []string{"t", "ref"} {
			sandboxtest.MustExec(t, db, fmt.Sprintf(ftPostsDDL, dbconn.QualifiedName(schema, tbl), extra))
		}
		ws := make([]*writer, writers)
		for i := range ws {
			ws[i] = &writer{db: db, schema: schema, id: i, next: int64(i+1) * 10_000_000, r: rand.New(rand.NewPCG(7, uint64(i)+2)), mix: ftMix}
		}
		r := rand.New(rand.NewPCG(7, 1))
		for start := 1; start <= rows; start += 500 {
			var vals []string
			var args []any
			for id := start; id < start+500 && id <= rows; id++ {
				vals = append(vals, "(?,?,?,?)")
				args = append(args, id, r.IntN(50), ftText(r, 1), ftText(r, 2))
				ws[id%writers].ids = append(ws[id%writers].ids, int64(id))
			}
			for _, tbl := range []string{"t", "ref"} {
				if _, err := db.Exec("INSERT INTO "+dbconn.QualifiedName(schema, tbl)+" (id, author, subject, body) VALUES "+strings.Join(vals, ","), args...); err != nil {
					t.Fatal(err)
				}
			}
		}
		return ws
	}
}

// searchIDs is the sorted ids a search finds in schema.tbl.
func searchIDs(t *testing.T, db *sql.DB, schema, tbl, mode, words string) []int64 {
	t.Helper()
	rows, err := db.Query("SELECT id FROM "+dbconn.QualifiedName(schema, tbl)+" WHERE MATCH (subject, body) AGAINST (? "+mode+")", words)
	if err != nil {
		t.Fatalf("%s search %q on %s: %v", mode, words, tbl, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// shadowFacts is what the shadow holds at a point of the run: its FULLTEXT indexes and InnoDB's
// id of the table (a rebuild gives it a new one).
type shadowFacts struct {
	fulltext int
	tableID  int64
}

func readShadowFacts(ctx context.Context, db *sql.DB, schema string) (shadowFacts, error) {
	var f shadowFacts
	err := db.QueryRowContext(ctx, "SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=? AND TABLE_NAME='_t_new' AND INDEX_TYPE='FULLTEXT'", schema).Scan(&f.fulltext)
	if err != nil {
		return f, err
	}
	for _, from := range []string{"information_schema.INNODB_SYS_TABLES", "information_schema.INNODB_TABLES"} { // MariaDB, MySQL
		if err = db.QueryRowContext(ctx, "SELECT TABLE_ID FROM "+from+" WHERE NAME=?", schema+"/_t_new").Scan(&f.tableID); err == nil {
			return f, nil
		}
	}
	return f, fmt.Errorf("the shadow's InnoDB table id: %w", err)
}

// TestFulltextBuiltAfterTheCopyAnswersAsMyISAM: the FULLTEXT index is not on the shadow during
// the copy and is added after it without a rebuild of the shadow (the same InnoDB table id), and
// under writers from before the copy until after the cut-over the converted table holds every
// acknowledged write and answers boolean and natural-language searches (MyISAM's stopwords,
// short words, ordinary words) with the same rows as a MyISAM reference that got the same writes.
// With binlog capture replay waits for the build's lock; with trigger capture the syncs are held.
func TestFulltextBuiltAfterTheCopyAnswersAsMyISAM(t *testing.T) {
	for _, v := range []struct {
		name, capture, extra string
		fulltext             int
	}{
		{"binlog/fulltext-only", plan.CaptureBinlog, "", 1},
		{"binlog/with-secondary", plan.CaptureBinlog, ", FULLTEXT KEY ft_body (body), KEY author (author)", 2},
		{"triggers/fulltext-only", plan.CaptureTriggers, "", 1},
		{"triggers/with-secondary", plan.CaptureTriggers, ", FULLTEXT KEY ft_body (body), KEY author (author)", 2},
	} {
		t.Run(v.name, func(t *testing.T) {
			if v.capture == plan.CaptureTriggers && gtidConsistent(openControl(t, srv)) {
				t.Skip("trigger capture is refused where enforce_gtid_consistency=ON")
			}
			var seen []string
			var before shadowFacts
			var hookDB *sql.DB
			hook := func(ctx context.Context, at Point, st *state.State) error {
				if at != Before(state.StageCopy) && at != After(state.StageCopy) && at != Before(state.StageCutover) {
					return nil
				}
				f, err := readShadowFacts(ctx, hookDB, st.Schema)
				if err != nil {
					return err
				}
				seen = append(seen, fmt.Sprintf("%s: %d FULLTEXT, table id %d", at, f.fulltext, f.tableID))
				switch {
				case at == Before(state.StageCopy):
					before = f
				case at == After(state.StageCopy) && f.fulltext != 0:
					return fmt.Errorf("the shadow has %d FULLTEXT indexes at the end of the copy", f.fulltext)
				case at == Before(state.StageCutover) && (f.fulltext != v.fulltext || f.tableID != before.tableID):
					return fmt.Errorf("before the cut-over the shadow has %d FULLTEXT indexes (want %d) and table id %d (%d before the copy; another means a rebuild)",
						f.fulltext, v.fulltext, f.tableID, before.tableID)
				}
				return nil
			}
			hookDB = openControl(t, srv)
			schema, db, _ := concurrentWritersOn(t, srv, seedPosts(v.extra, 6000, 4), []string{"id", "author", "subject", "body"}, appPause, func(o *Options, _ *faults.Hooks) {
				o.Capture, o.Hook = v.capture, hook
			})
			t.Log(strings.Join(seen, "; "))
			if len(seen) != 3 || before.fulltext != 0 {
				t.Fatalf("the hooks saw %q", seen)
			}
			compareSearches(t, db, schema)
		})
	}
}

// compareSearches checks every search of ftSearches in both modes finds the same rows in the
// converted table t as in the MyISAM reference, and that the searches tell stopwords apart.
func compareSearches(t *testing.T, db *sql.DB, schema string) {
	t.Helper()
	for _, mode := range []string{"IN BOOLEAN MODE", "IN NATURAL LANGUAGE MODE"} {
		for _, s := range ftSearches {
			if mode != "IN BOOLEAN MODE" && strings.ContainsAny(s, "+-*") {
				continue
			}
			got, want := searchIDs(t, db, schema, "t", mode, s), searchIDs(t, db, schema, "ref", mode, s)
			if !slices.Equal(got, want) {
				t.Errorf("%s %q: %d rows on the converted table, %d on MyISAM", mode, s, len(got), len(want))
			}
		}
	}
	// A MyISAM stopword InnoDB's list lacks and a short word find nothing on MyISAM; an ordinary
	// word finds rows: otherwise the comparison above proves nothing about stopwords.
	if n, m, k := len(searchIDs(t, db, schema, "ref", "IN BOOLEAN MODE", "however")), len(searchIDs(t, db, schema, "ref", "IN BOOLEAN MODE", "cat")),
		len(searchIDs(t, db, schema, "ref", "IN BOOLEAN MODE", "sunny")); n != 0 || m != 0 || k == 0 {
		t.Fatalf("MyISAM found 'however' in %d rows, 'cat' in %d, 'sunny' in %d: the words do not test stopwords", n, m, k)
	}
}
