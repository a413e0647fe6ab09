package binlog

import (
	"testing"

	"github.com/enginemig/enginemig/internal/db/table"
)

// Every change handed to the applier is written: an insert as an upsert, an UPDATE that moved its
// key as a delete of the old key and an upsert, a delete as a delete (which changes may be left
// out is shadow/order.go's rule 2).
func TestPlanWritesEveryChange(t *testing.T) {
	ti := &table.Info{Schema: "db", Name: "t", Columns: []table.Column{{Name: "id", DataType: "int"}, {Name: "v", DataType: "int"}},
		Indexes: []table.Index{{Name: "PRIMARY", Unique: true, Columns: []table.IndexColumn{{Name: "id"}}}}}
	q, err := table.NewSQL(ti, "_t_new")
	if err != nil {
		t.Fatal(err)
	}
	a := NewApplier(nil, q)
	ops := a.plan([]Change{
		{Kind: Insert, After: []any{int64(1), int64(1)}},
		{Kind: Update, Before: []any{int64(1), int64(1)}, After: []any{int64(1), int64(2)}},
		{Kind: Update, Before: []any{int64(1), int64(2)}, After: []any{int64(5), int64(2)}},
		{Kind: Delete, Before: []any{int64(5), int64(2)}},
	})
	want := []opKind{opUpsert, opUpsert, opDelete, opUpsert, opDelete}
	if len(ops) != len(want) {
		t.Fatalf("planned %d operations %+v, want %d", len(ops), ops, len(want))
	}
	for i, k := range want {
		if ops[i].kind != k {
			t.Errorf("operation %d is %v, want %v", i, ops[i].kind, k)
		}
	}
}
