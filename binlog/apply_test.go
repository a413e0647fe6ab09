package binlog

import (
	"testing"

	"github.com/enginemig/enginemig/table"
)

// Replay may leave only an UPDATE's new row to the copy: inserts (possibly invisible to a chunk
// that starts right after their event, as MyISAM concurrent inserts) and deletes always apply.
func TestPlanSkipsOnlyUpdatedRows(t *testing.T) {
	ti := &table.Info{Schema: "db", Name: "t", Columns: []table.Column{{Name: "id", DataType: "int"}, {Name: "v", DataType: "int"}},
		Indexes: []table.Index{{Name: "PRIMARY", Unique: true, Columns: []table.IndexColumn{{Name: "id"}}}}}
	q, err := table.NewSQL(ti, "_t_new")
	if err != nil {
		t.Fatal(err)
	}
	a := NewApplier(nil, q)
	ahead := func([]any) bool { return true } // the copy will read every key
	ops := a.plan([]Change{
		{Kind: Insert, After: []any{int64(1), int64(1)}},
		{Kind: Update, Before: []any{int64(1), int64(1)}, After: []any{int64(1), int64(2)}},
		{Kind: Update, Before: []any{int64(1), int64(2)}, After: []any{int64(5), int64(2)}},
		{Kind: Delete, Before: []any{int64(5), int64(2)}},
	}, ahead)
	want := []opKind{opUpsert, opDelete, opDelete} // the insert, the key change's delete, the delete
	if len(ops) != len(want) {
		t.Fatalf("planned %d operations %+v, want %d", len(ops), ops, len(want))
	}
	for i, k := range want {
		if ops[i].kind != k {
			t.Errorf("operation %d is %v, want %v", i, ops[i].kind, k)
		}
	}
	if all := a.plan([]Change{{Kind: Update, Before: []any{int64(1), int64(1)}, After: []any{int64(1), int64(2)}}}, nil); len(all) != 1 {
		t.Errorf("without skip every change applies: %+v", all)
	}
}
