package ackload

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Shape describes a table of any key shape to TwinLoad: each row carries an integer N (its own
// column, "n") from which the key columns' values follow, so a writer that owns a range of N owns
// those rows whatever the key is made of.
type Shape struct {
	// Key lists the key columns, KeyOf gives their values for an N; both empty: the table has no
	// key, its rows are found by n alone, and rows may be exact duplicates of each other.
	Key   []string
	KeyOf func(n int64) []any
	// Payload lists the other columns the writers set (besides n and v), PayloadOf their values
	// for a row's N and version.
	Payload   []string
	PayloadOf func(n, version int64) []any
	// Compare lists every column the end check compares (generated ones too); default: Key, n, v
	// and Payload.
	Compare []string
}

func (s Shape) keyless() bool { return len(s.Key) == 0 }

// TwinConfig sizes a TwinLoad.
type TwinConfig struct {
	Writers       int           // default 3
	RowsPerWriter int           // seeded rows per writer, default 2000
	Pause         time.Duration // between one writer's operations; default 2 ms (an application's pace, not flat out)
	Seed          uint64
}

// TwinLoad writes to a table and, once the server acknowledged each write, the same write to a
// reference twin that nothing else touches: at the end the two must hold the same rows. Every
// read of a writer's own row is also checked against what the writer last wrote there.
type TwinLoad struct {
	db           *sql.DB
	table, twin  string // quoted
	shape        Shape
	cfg          TwinConfig
	acked, reads atomic.Int64
	mu           sync.Mutex
	problems     []string
}

// twinRow is a writer's model of one N: its value, the N its payload was computed from (a key
// change keeps the payload), and, for a table without a key, how many identical copies it has.
// Copies must stay identical: a DELETE ... LIMIT 1 removes whichever copy the engine finds first,
// which differs between MyISAM and InnoDB, so a copy that differed would make the table and its
// twin differ with no fault of the conversion.
type twinRow struct{ v, pay, copies int64 }

// NewTwinLoad seeds table and twin (both created by the caller with the same definition, empty)
// with the same rows.
func NewTwinLoad(ctx context.Context, db *sql.DB, schema, table, twin string, shape Shape, cfg TwinConfig) (*TwinLoad, error) {
	if cfg.Writers <= 0 {
		cfg.Writers = 3
	}
	if cfg.RowsPerWriter <= 0 {
		cfg.RowsPerWriter = 2000
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 2 * time.Millisecond
	}
	if len(shape.Compare) == 0 {
		shape.Compare = append(append(slices.Clone(shape.Key), "n", "v"), shape.Payload...)
	}
	l := &TwinLoad{db: db, table: dbconn.QualifiedName(schema, table), twin: dbconn.QualifiedName(schema, twin), shape: shape, cfg: cfg}
	for _, tbl := range []string{l.table, l.twin} {
		for w := 0; w < cfg.Writers; w++ {
			for start := 0; start < cfg.RowsPerWriter; start += 500 {
				var rows [][]any
				for i := start; i < min(start+500, cfg.RowsPerWriter); i++ {
					n := l.nOf(w, int64(i))
					rows = append(rows, l.values(n, 0, n))
				}
				if err := l.insert(ctx, db, tbl, rows); err != nil {
					return nil, fmt.Errorf("seed %s: %w", tbl, err)
				}
			}
		}
	}
	return l, nil
}

// nOf is writer w's i-th N: each writer owns N in [w*1e7, (w+1)*1e7).
func (l *TwinLoad) nOf(w int, i int64) int64 { return int64(w)*10_000_000 + i + 1 }

func (l *TwinLoad) columns() []string {
	var cols []string
	if !l.shape.keyless() {
		cols = append(cols, l.shape.Key...)
	}
	return append(append(cols, "n", "v"), l.shape.Payload...)
}

// values are a row's columns: key and n from n, the payload from (pay, v).
func (l *TwinLoad) values(n, v, pay int64) []any {
	var vals []any
	if !l.shape.keyless() {
		vals = append(vals, l.shape.KeyOf(n)...)
	}
	return append(append(vals, n, v), l.payloadArgs(pay, v)...)
}

func (l *TwinLoad) insert(ctx context.Context, db *sql.DB, tbl string, rows [][]any) error {
	cols := l.columns()
	one := "(" + placeholders(len(cols)) + ")"
	var args []any
	for _, r := range rows {
		args = append(args, r...)
	}
	_, err := db.ExecContext(ctx, "INSERT INTO "+tbl+" ("+quoteList(cols)+") VALUES "+
		strings.TrimSuffix(strings.Repeat(one+",", len(rows)), ","), args...)
	return err
}

// match is the WHERE clause that finds N's rows, and its arguments.
func (l *TwinLoad) match(n int64) (string, []any) {
	if l.shape.keyless() {
		return "n = ?", []any{n}
	}
	var conds []string
	for _, c := range l.shape.Key {
		conds = append(conds, dbconn.QuoteIdent(c)+" = ?")
	}
	return strings.Join(conds, " AND "), l.shape.KeyOf(n)
}

func quoteList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = dbconn.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// Start runs the writers until the returned function is called (it waits for them to end).
func (l *TwinLoad) Start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < l.cfg.Writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			l.write(ctx, w)
		}(w)
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// write is one writer: reads, updates, inserts (for a table without a key, of an exact duplicate
// too), deletes and (with a key) key changes of its own rows, each mirrored to the twin once
// acknowledged.
func (l *TwinLoad) write(ctx context.Context, w int) {
	r := rand.New(rand.NewPCG(l.cfg.Seed, uint64(w)))
	model := map[int64]*twinRow{}
	var live []int64
	for i := 0; i < l.cfg.RowsPerWriter; i++ {
		n := l.nOf(w, int64(i))
		model[n] = &twinRow{pay: n, copies: 1}
		live = append(live, n)
	}
	next := int64(l.cfg.RowsPerWriter)
	tick := time.NewTicker(l.cfg.Pause)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if len(live) == 0 {
			continue
		}
		i := r.IntN(len(live))
		n := live[i]
		row := model[n]
		switch op := r.IntN(20); {
		case op < 8: // read
			l.read(n, row)
		case op < 13: // update
			where, args := l.match(n)
			if l.mirror("UPDATE %s SET v = ?"+l.setPayload()+" WHERE "+where, append(append([]any{row.v + 1}, l.payloadArgs(n, row.v+1)...), args...)...) {
				row.v++
				row.pay = n
			}
		case op < 16: // insert a new row, or (no key) a duplicate of this one
			if l.shape.keyless() && op == 15 {
				if l.mirror(l.insertOne(), l.values(n, row.v, row.pay)...) {
					row.copies++
				}
				continue
			}
			n2 := l.nOf(w, next)
			next++
			if l.mirror(l.insertOne(), l.values(n2, 0, n2)...) {
				model[n2] = &twinRow{pay: n2, copies: 1}
				live = append(live, n2)
			}
		case op < 18: // delete (one copy where rows are duplicates)
			where, args := l.match(n)
			limit := ""
			if l.shape.keyless() {
				limit = " LIMIT 1"
			}
			if l.mirror("DELETE FROM %s WHERE "+where+limit, args...) {
				if row.copies--; row.copies == 0 {
					delete(model, n)
					live = slices.Delete(live, i, i+1)
				}
			}
		default: // move the row to a new key (no key: change its n)
			n2 := l.nOf(w, next)
			next++
			where, args := l.match(n)
			set, setArgs := l.setKey(n2)
			if l.mirror("UPDATE %s SET "+set+" WHERE "+where, append(setArgs, args...)...) {
				delete(model, n)
				model[n2] = row
				live[i] = n2
			}
		}
	}
}

// insertOne is the format (for mirror) of a one-row INSERT of every written column.
func (l *TwinLoad) insertOne() string {
	return "INSERT INTO %s (" + quoteList(l.columns()) + ") VALUES (" + placeholders(len(l.columns())) + ")"
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func (l *TwinLoad) setPayload() string {
	var s string
	for _, c := range l.shape.Payload {
		s += ", " + dbconn.QuoteIdent(c) + " = ?"
	}
	return s
}

func (l *TwinLoad) payloadArgs(n, v int64) []any {
	if l.shape.PayloadOf == nil {
		return nil
	}
	return l.shape.PayloadOf(n, v)
}

// setKey sets a row's key columns (and n) to those of n2.
func (l *TwinLoad) setKey(n2 int64) (string, []any) {
	sets := []string{"n = ?"}
	args := []any{n2}
	if !l.shape.keyless() {
		for _, c := range l.shape.Key {
			sets = append(sets, dbconn.QuoteIdent(c)+" = ?")
		}
		args = append(args, l.shape.KeyOf(n2)...)
	}
	return strings.Join(sets, ", "), args
}

// mirror runs the statement (a format with one %s for the table) on the table and, once
// acknowledged, on the twin. It reports whether the table acknowledged it.
func (l *TwinLoad) mirror(format string, args ...any) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := l.db.ExecContext(ctx, fmt.Sprintf(format, l.table), args...); err != nil {
		l.problem("%s: %v", fmt.Sprintf(format, "t"), err)
		return false
	}
	l.acked.Add(1)
	if _, err := l.db.ExecContext(ctx, fmt.Sprintf(format, l.twin), args...); err != nil {
		l.problem("the twin refused what the table took: %s: %v", fmt.Sprintf(format, "twin"), err)
	}
	return true
}

// read checks that N's rows are what the writer last wrote.
func (l *TwinLoad) read(n int64, want *twinRow) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	where, args := l.match(n)
	var copies int64
	var lo, hi sql.NullInt64
	if err := l.db.QueryRowContext(ctx, "SELECT COUNT(*), MIN(v), MAX(v) FROM "+l.table+" WHERE "+where, args...).Scan(&copies, &lo, &hi); err != nil {
		l.problem("read of n=%d: %v", n, err)
		return
	}
	l.reads.Add(1)
	if copies != want.copies || lo.Int64 != want.v || hi.Int64 != want.v {
		l.problem("read of n=%d: %d row(s) with v %d..%d, the writer's last acknowledged write left %d with v %d", n, copies, lo.Int64, hi.Int64, want.copies, want.v)
	}
}

func (l *TwinLoad) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

// Problems are the failed statements and wrong reads so far (nil: none).
func (l *TwinLoad) Problems() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.problems)
}

// Acked is the number of writes the table acknowledged, Reads the number of checked reads.
func (l *TwinLoad) Acked() int64 { return l.acked.Load() }
func (l *TwinLoad) Reads() int64 { return l.reads.Load() }

// Differences compares the table and its twin as multisets of rows (every Compare column, NULLs
// and bytes exact) and describes up to five rows that one has more often than the other.
func (l *TwinLoad) Differences(ctx context.Context) (rows int, diffs []string, err error) {
	var exprs []string
	for _, c := range l.shape.Compare {
		exprs = append(exprs, "IFNULL(HEX("+dbconn.QuoteIdent(c)+"), 'NULL')")
	}
	read := func(tbl string) (map[string]int, int, error) {
		rs, err := l.db.QueryContext(ctx, "SELECT CONCAT_WS('|', "+strings.Join(exprs, ", ")+") FROM "+tbl)
		if err != nil {
			return nil, 0, err
		}
		defer rs.Close()
		m, total := map[string]int{}, 0
		for rs.Next() {
			var s string
			if err := rs.Scan(&s); err != nil {
				return nil, 0, err
			}
			m[s]++
			total++
		}
		return m, total, rs.Err()
	}
	a, total, err := read(l.table)
	if err != nil {
		return 0, nil, err
	}
	b, _, err := read(l.twin)
	if err != nil {
		return 0, nil, err
	}
	for s, k := range a {
		if b[s] != k && len(diffs) < 5 {
			diffs = append(diffs, fmt.Sprintf("the table has %d, the twin %d of (%s) = %s", k, b[s], strings.Join(l.shape.Compare, ", "), s))
		}
	}
	for s, k := range b {
		if a[s] == 0 && len(diffs) < 5 {
			diffs = append(diffs, fmt.Sprintf("the table has 0, the twin %d of (%s) = %s", k, strings.Join(l.shape.Compare, ", "), s))
		}
	}
	return total, diffs, nil
}
