package copier

import (
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/table"
)

// A chunk never grows past Pace.MaxChunk, however fast its chunks go and even below the usual
// smallest chunk: the cap is what bounds a client-side copy's chunks of wide rows in memory and a
// Galera node's write sets (minChunk used to win over it).
func TestMaxChunkIsAHardCap(t *testing.T) {
	c := NewChunker(nil, nil, Pace{ChunkTime: 100 * time.Millisecond, MaxChunk: 3})
	if got := c.size.Load(); got != 3 {
		t.Fatalf("first chunk %d rows, want the cap, 3", got)
	}
	for range 5 {
		c.took(Step{Range: table.Range{Hi: []any{1}}, Size: int(c.size.Load()), Target: 100 * time.Millisecond}, time.Millisecond)
		if got := c.size.Load(); got != 3 {
			t.Fatalf("after a fast chunk %d rows, want the cap, 3", got)
		}
	}
}
