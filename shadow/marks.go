package shadow

import (
	"context"
	"database/sql"
	"sort"
	"sync"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/table"
)

// marks are rule 5's record (order.go): the ranges of a keyless table's chunk key that the copy
// has written, each with the binlog position its read stands for. Chunks are copied one at a
// time in key order (copier.keylessConfig), so the ranges arrive sorted and disjoint.
type marks struct {
	mu     sync.Mutex
	ranges []marked
	now    func(ctx context.Context, q *sql.Conn) (binlog.Position, error)
}

type marked struct {
	r  table.Range // (Lo, Hi]; nil ends are open, both nil for a table copied in one chunk
	at binlog.Position
}

func newMarks() *marks {
	return &marks{now: func(ctx context.Context, q *sql.Conn) (binlog.Position, error) {
		return binlog.CurrentPosition(ctx, q)
	}}
}

// mark reads the position on q, which holds the source READ-locked, and returns what records r
// as copied at it.
func (m *marks) mark(ctx context.Context, q *sql.Conn) (func(r table.Range), error) {
	at, err := m.now(ctx, q)
	if err != nil {
		return nil, err
	}
	return func(r table.Range) {
		m.mu.Lock()
		m.ranges = append(m.ranges, marked{r: r, at: at})
		m.mu.Unlock()
	}, nil
}

// applies reports whether a change read at at to the row whose chunk key is key must be written:
// its chunk was read before the change was made (the read's position precedes the change's
// event). A chunk not yet read will read the change itself.
func (m *marks) applies(key []any, at binlog.Position) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := sort.Search(len(m.ranges), func(i int) bool {
		hi := m.ranges[i].r.Hi
		if hi == nil || len(key) == 0 {
			return true
		}
		c, ok := copier.CompareInts(key[0], hi[0])
		return !ok || c <= 0
	})
	if i == len(m.ranges) {
		return false
	}
	g := m.ranges[i]
	if lo := g.r.Lo; lo != nil && len(key) > 0 {
		if c, ok := copier.CompareInts(key[0], lo[0]); !ok || c <= 0 {
			return false
		}
	}
	return at.Compare(g.at) > 0
}

// toWrite is rule 5 over a batch: each side of a change is written only if its chunk was read
// before it; an update whose old and new rows lie in chunks on different sides of that line is
// written as the half that applies.
func (m *marks) toWrite(batch []binlog.Change, keyAt []int) []binlog.Change {
	out := batch[:0:0]
	for _, ch := range batch {
		switch ch.Kind {
		case binlog.Insert:
			if m.applies(keyOf(ch.After, keyAt), ch.At) {
				out = append(out, ch)
			}
		case binlog.Delete:
			if m.applies(keyOf(ch.Before, keyAt), ch.At) {
				out = append(out, ch)
			}
		case binlog.Update:
			before, after := m.applies(keyOf(ch.Before, keyAt), ch.At), m.applies(keyOf(ch.After, keyAt), ch.At)
			switch {
			case before && after:
				out = append(out, ch)
			case before:
				out = append(out, binlog.Change{Kind: binlog.Delete, Before: ch.Before, At: ch.At})
			case after:
				out = append(out, binlog.Change{Kind: binlog.Insert, After: ch.After, At: ch.At})
			}
		}
	}
	return out
}
