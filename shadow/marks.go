package shadow

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// marks are rule 5's record (order.go): the ranges of a keyless table's chunk key that the copy
// has written, each with the binlog position its read stands for. Chunks are copied one at a
// time in key order (copier.keylessConfig), so the ranges arrive sorted and disjoint. A change
// is placed among them by its chunk-key value in the index's order (table.KeyOrder); character
// columns are placed by the weight strings the server gives their values in their collation,
// read for each batch's values (and each new bound) in one round trip per column.
type marks struct {
	mu     sync.Mutex
	ranges []marked
	now    func(ctx context.Context, q *sql.Conn) (binlog.Position, error)
	order  *table.KeyOrder // nil: the table is copied in one chunk
	db     dbconn.Querier  // reads weights (set at Open, before any batch)

	space     map[int][]byte     // per weighed column, a space's weight if its collation pads (table.Weigher)
	bounds    map[weighed][]byte // the weights of the ranges' bounds
	batch     map[weighed][]byte // the weights of the current batch's values
	unweighed []table.Range      // ranges whose bounds' weights are not read yet
}

type weighed struct {
	col int
	v   string
}

type marked struct {
	r  table.Range // (Lo, Hi]; nil ends are open, both nil for a table copied in one chunk
	at binlog.Position
}

func newMarks(order *table.KeyOrder) *marks {
	return &marks{order: order, bounds: map[weighed][]byte{}, space: map[int][]byte{},
		now: func(ctx context.Context, q *sql.Conn) (binlog.Position, error) {
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
		m.unweighed = append(m.unweighed, r)
		m.mu.Unlock()
	}, nil
}

// Weight is the weight string read for column i's value v (weigh read it before).
func (m *marks) Weight(i int, v any) []byte {
	k := weighed{i, string(asBytes(v))}
	if w, ok := m.bounds[k]; ok {
		return w
	}
	return m.batch[k]
}

// SpaceWeight is table.Weigher's (weigh read it before).
func (m *marks) SpaceWeight(i int) []byte { return m.space[i] }

func asBytes(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return []byte(fmt.Sprint(v))
}

// compare orders two chunk-key values (see table.KeyOrder.Compare).
func (m *marks) compare(a, b []any) (int, error) {
	if m.order == nil || len(a) == 0 || len(b) == 0 {
		return 0, nil
	}
	return m.order.Compare(a, b, m)
}

// applies reports whether a change read at at to the row whose chunk key is key must be written:
// its chunk was read before the change was made (the read's position precedes the change's
// event). A chunk not yet read will read the change itself. Called with mu held.
func (m *marks) applies(key []any, at binlog.Position) (bool, error) {
	var cerr error
	i := sort.Search(len(m.ranges), func(i int) bool {
		hi := m.ranges[i].r.Hi
		if hi == nil || len(key) == 0 {
			return true
		}
		c, err := m.compare(key, hi)
		if err != nil {
			cerr = err
		}
		return c <= 0
	})
	if cerr != nil {
		return false, cerr
	}
	if i == len(m.ranges) {
		return false, nil
	}
	g := m.ranges[i]
	if lo := g.r.Lo; lo != nil && len(key) > 0 {
		c, err := m.compare(key, lo)
		if err != nil || c <= 0 {
			return false, err
		}
	}
	return at.Compare(g.at) > 0, nil
}

// toWrite is rule 5 over a batch: each side of a change is written only if its chunk was read
// before it; an update whose old and new rows lie in chunks on different sides of that line is
// written as the half that applies.
func (m *marks) toWrite(ctx context.Context, batch []binlog.Change, keyAt []int) ([]binlog.Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.weigh(ctx, batch, keyAt); err != nil {
		return nil, fmt.Errorf("place replayed changes among the copy's chunks: %w", err)
	}
	out := batch[:0:0]
	for _, ch := range batch {
		var before, after bool
		var err error
		if ch.Kind != binlog.Insert {
			if before, err = m.applies(keyOf(ch.Before, keyAt), ch.At); err != nil {
				return nil, err
			}
		}
		if ch.Kind != binlog.Delete {
			if after, err = m.applies(keyOf(ch.After, keyAt), ch.At); err != nil {
				return nil, err
			}
		}
		switch {
		case ch.Kind == binlog.Insert && after, ch.Kind == binlog.Delete && before:
			out = append(out, ch)
		case ch.Kind != binlog.Update:
		case before && after:
			out = append(out, ch)
		case before:
			out = append(out, binlog.Change{Kind: binlog.Delete, Before: ch.Before, At: ch.At})
		case after:
			out = append(out, binlog.Change{Kind: binlog.Insert, After: ch.After, At: ch.At})
		}
	}
	return out, nil
}

// weigh reads the weight strings of the new ranges' bounds and of the batch's chunk-key values
// in the weighed columns, one query per column. Called with mu held.
func (m *marks) weigh(ctx context.Context, batch []binlog.Change, keyAt []int) error {
	m.batch = map[weighed][]byte{}
	if m.order == nil {
		return nil
	}
	for i := 0; i < m.order.Columns(); i++ {
		if !m.order.Weighed(i) {
			continue
		}
		var bounds, vals [][]byte
		for _, r := range m.unweighed {
			for _, b := range [][]any{r.Lo, r.Hi} {
				if b != nil && b[i] != nil {
					bounds = append(bounds, asBytes(b[i]))
				}
			}
		}
		for _, ch := range batch {
			for _, row := range [][]any{ch.Before, ch.After} {
				if row != nil && row[keyAt[i]] != nil {
					vals = append(vals, asBytes(row[keyAt[i]]))
				}
			}
		}
		if err := m.read(ctx, i, bounds, m.bounds); err != nil {
			return err
		}
		if err := m.read(ctx, i, vals, m.batch); err != nil {
			return err
		}
	}
	m.unweighed = nil
	return nil
}

// read reads the weights of column i's values into into, those it has not already.
func (m *marks) read(ctx context.Context, i int, vals [][]byte, into map[weighed][]byte) error {
	var todo []any
	seen := map[string]bool{}
	for _, v := range vals {
		k := weighed{i, string(v)}
		if _, ok := into[k]; ok || seen[k.v] {
			continue
		}
		seen[k.v] = true
		todo = append(todo, v)
	}
	if len(todo) == 0 {
		return nil
	}
	if _, ok := m.space[i]; !ok {
		var pad bool
		var space []byte
		if err := m.db.QueryRowContext(ctx, m.order.CollationQuery(i)).Scan(&pad, &space); err != nil {
			return fmt.Errorf("read the chunk key's collation: %w", err)
		}
		if !pad {
			space = nil
		}
		m.space[i] = space
	}
	const per = 500
	for len(todo) > 0 {
		n := min(per, len(todo))
		ws, err := dbconn.ScanValues(m.db.QueryRowContext(ctx, m.order.WeightQuery(i, n), todo[:n]...), n)
		if err != nil {
			return fmt.Errorf("read the weights of chunk-key values: %w", err)
		}
		for j, w := range ws {
			into[weighed{i, string(todo[j].([]byte))}] = asBytes(w)
		}
		todo = todo[n:]
	}
	return nil
}
