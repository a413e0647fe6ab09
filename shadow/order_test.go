package shadow

import (
	"testing"
	"time"
)

// Rule 1: a replay batch never runs while a chunk is between its read and its write, and a chunk
// ended from another goroutine (the client-side copy's writer) releases it.
func TestOrderKeepsBatchesOutOfChunks(t *testing.T) {
	var o order
	end := o.BeginChunk()
	applied := make(chan struct{})
	apply := o.replay(nil)
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
	if o.copyWillRead([]any{int64(1)}) {
		t.Fatal("a change was skipped before the copy existed")
	}
}
