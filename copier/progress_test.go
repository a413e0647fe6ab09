package copier

import (
	"reflect"
	"testing"

	"github.com/enginemig/enginemig/internal/db/table"
)

// Parallel chunks finish out of order: Ahead must never call a key of a written chunk ahead (its
// change would be dropped and lost), and the watermark must not pass a chunk not yet written (a
// resume would skip it).
func TestProgressWithChunksOutOfOrder(t *testing.T) {
	info := &table.Info{Schema: "db", Name: "t", Columns: []table.Column{{Name: "id", DataType: "int"}},
		Indexes: []table.Index{{Name: "PRIMARY", Unique: true, Columns: []table.IndexColumn{{Name: "id"}}}}}
	q, err := table.NewSQL(info, "_t_new")
	if err != nil {
		t.Fatal(err)
	}
	c := New(nil, nil, q, nil, nil, Config{}, []any{int64(100)})
	key := func(k int64) []any { return []any{k} }
	ahead := func(want map[int64]bool) {
		t.Helper()
		for k, w := range want {
			if got := c.Ahead(key(k)); got != w {
				t.Errorf("Ahead(%d) = %v, want %v", k, got, w)
			}
		}
	}
	ahead(map[int64]bool{50: false, 150: true}) // resumed after 100
	one, two, three := c.handOut(), c.handOut(), c.handOut()
	// Chunk two, (200, 300], overtakes chunk one, (100, 200].
	c.began(two, key(300))
	c.finished(two, key(300), 100)
	ahead(map[int64]bool{150: false, 250: false, 350: true})
	if w := c.Watermark(); !reflect.DeepEqual(w, key(100)) {
		t.Fatalf("watermark %v past chunk one, not yet written", w)
	}
	c.began(one, key(200))
	c.finished(one, key(200), 100)
	if w := c.Watermark(); !reflect.DeepEqual(w, key(300)) {
		t.Fatalf("watermark %v, want 300 once chunks one and two are written", w)
	}
	c.began(three, nil) // the rest of the table
	c.finished(three, nil, 7)
	ahead(map[int64]bool{350: false, 1 << 40: false})
	if n := c.Copied(); n != 207 {
		t.Fatalf("copied %d, want 207", n)
	}
}
