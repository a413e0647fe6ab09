package binlog

import (
	"fmt"
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

// Replay's statements stay within maxStatementBytes whatever the width of the rows: 2 MB rows go
// as many as fit in a statement, a row larger than the bound alone, small rows up to maxStatementRows.
// (Bound by rows only, 24 rows of 2 MB made a 48 MB REPLACE, over the server's max_allowed_packet:
// TestWideRowsStayWithinMemory in package migration.)
func TestStatementsStayWithinTheirBytes(t *testing.T) {
	ti := &table.Info{Schema: "db", Name: "t", Columns: []table.Column{{Name: "id", DataType: "int"}, {Name: "b", DataType: "longblob"}},
		Indexes: []table.Index{{Name: "PRIMARY", Unique: true, Columns: []table.IndexColumn{{Name: "id"}}}}}
	q, err := table.NewSQL(ti, "_t_new")
	if err != nil {
		t.Fatal(err)
	}
	a := NewApplier(nil, q)
	upsert := func(n int) op { return op{kind: opUpsert, row: []any{int64(1), make([]byte, n)}} }
	runs := func(ops []op) []int {
		var sizes []int
		for start := 0; start < len(ops); {
			end := a.runEnd(ops, start)
			sizes = append(sizes, end-start)
			start = end
		}
		return sizes
	}
	wide := []op{upsert(2 << 20), upsert(2 << 20), upsert(2 << 20), upsert(5 << 20), upsert(10)}
	if got := fmt.Sprint(runs(wide)); got != "[1 1 1 1 1]" {
		// Two 2 MB rows and their ids are over 4 MB: one each; the 5 MB row alone, and nothing
		// joins it.
		t.Errorf("wide rows in statements of %s, want [1 1 1 1 1]", got)
	}
	if got := fmt.Sprint(runs(append([]op{upsert(1 << 20)}, wide[:1]...))); got != "[2]" {
		t.Errorf("a 1 MB and a 2 MB row in statements of %s, want [2]", got)
	}
	var small []op
	for range 1200 {
		small = append(small, upsert(100))
	}
	if got := fmt.Sprint(runs(small)); got != "[500 500 200]" {
		t.Errorf("small rows in statements of %s, want [500 500 200]", got)
	}
}
