package shadow

import (
	"context"
	"testing"
	"time"

	"github.com/enginemig/enginemig/binlog"
)

// Rule 1: a replay batch never runs while a chunk is between its read and its write, and a chunk
// ended from another goroutine (the client-side copy's writer) releases it.
func TestOrderKeepsBatchesOutOfChunks(t *testing.T) {
	var o order
	end := o.BeginChunk()
	applied := make(chan struct{})
	apply := o.replay(nil, nil)
	go func() {
		o.Exclusive(func() error { close(applied); return nil })
	}()
	select {
	case <-applied:
		t.Fatal("an exclusive section ran while a chunk was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	go end()
	select {
	case <-applied:
	case <-time.After(5 * time.Second):
		t.Fatal("ending the chunk from another goroutine did not release the order")
	}
	if apply == nil {
		t.Fatal("no apply function")
	}
	// Rule 2 before the copy has started: nothing is skipped, every change is applied.
	batch := []binlog.Change{{Kind: binlog.Update, Before: []any{int64(1), int64(1)}, After: []any{int64(1), int64(2)}}}
	if got, _ := o.toWrite(context.Background(), batch, []int{0}); len(got) != 1 {
		t.Fatal("a change was skipped before the copy existed")
	}
}

// Rule 2: replay may leave only an UPDATE's new row to the copy: inserts (possibly invisible to a
// chunk that starts right after their event, as MyISAM concurrent inserts) and deletes always
// apply, and an UPDATE that moved its key still deletes the old one.
func TestReplaySkipsOnlyUpdatedRows(t *testing.T) {
	ahead := func([]any) bool { return true } // the copy will read every key
	kept := skipAhead([]binlog.Change{
		{Kind: binlog.Insert, After: []any{int64(1), int64(1)}},
		{Kind: binlog.Update, Before: []any{int64(1), int64(1)}, After: []any{int64(1), int64(2)}},
		{Kind: binlog.Update, Before: []any{int64(1), int64(2)}, After: []any{int64(5), int64(2)}},
		{Kind: binlog.Delete, Before: []any{int64(5), int64(2)}},
	}, []int{0}, ahead)
	// the insert, the key change's delete (of key 1), the delete
	want := []struct {
		kind binlog.Kind
		key  int64
	}{{binlog.Insert, 1}, {binlog.Delete, 1}, {binlog.Delete, 5}}
	if len(kept) != len(want) {
		t.Fatalf("kept %d changes %+v, want %d", len(kept), kept, len(want))
	}
	for i, w := range want {
		row := kept[i].After
		if w.kind == binlog.Delete {
			row = kept[i].Before
		}
		if kept[i].Kind != w.kind || row[0] != w.key {
			t.Errorf("change %d is %v of key %v, want %v of %d", i, kept[i].Kind, row[0], w.kind, w.key)
		}
	}
	never := func([]any) bool { return false }
	if all := skipAhead([]binlog.Change{{Kind: binlog.Update, Before: []any{int64(1), int64(1)}, After: []any{int64(1), int64(2)}}}, []int{0}, never); len(all) != 1 {
		t.Errorf("with no key ahead every change applies: %+v", all)
	}
}
