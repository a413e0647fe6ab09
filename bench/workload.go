package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// op is one kind of statement in the mix, with how to draw its parameters.
type op struct {
	name   string
	weight int
	sql    string
	rows   bool // returns a result set (read it all, as an application does)
	args   func(r *rand.Rand, args []any) []any
	// duty is the share of time a background client runs the statement (0: loop without pause),
	// to replay a captured report at the rate production ran it.
	duty float64
}

// workload is what the threads run against one table: the weighted statements and background
// reports, all bound to that table.
type workload struct {
	target     Target
	info       *table.Info
	keys       keySource
	ops        []op
	weights    []int // ops' weights, for one random draw per statement
	total      int
	background []op
	// replay describes the captured statements (replayed or not), when the mix was captured.
	replay []ReplayStat
}

// pick chooses a statement by weight, the same way Mix.Op chooses among the built-in ones.
func (w *workload) pick(r *rand.Rand) int { return weightedIndex(r.IntN(w.total), w.weights...) }

// largeTypes are not read by the built-in SELECT: a typical primary-key lookup loads the row's
// scalar columns; blobs are usually fetched separately, and would make the test measure I/O.
var largeTypes = map[string]bool{"tinyblob": true, "blob": true, "mediumblob": true, "longblob": true,
	"tinytext": true, "text": true, "mediumtext": true, "longtext": true, "json": true, "geometry": true,
	"point": true, "linestring": true, "polygon": true, "multipoint": true, "multilinestring": true,
	"multipolygon": true, "geometrycollection": true}

// insertSamples is how many existing rows serve as value templates for INSERTs: real rows always
// have values the column types accept (enums, dates, decimals), unlike invented ones.
const insertSamples = 64

func buildWorkload(ctx context.Context, db *sql.DB, t Target, cfg Config) (*workload, error) {
	info, err := table.Load(ctx, db, t.Schema, t.Table)
	if err != nil {
		return nil, fmt.Errorf("bench %s: %w", dbconn.QualifiedName(t.Schema, t.Table), err)
	}
	w := &workload{target: t, info: info}
	key, hasKey := info.CopyKey()
	if hasKey {
		if w.keys, err = loadKeys(ctx, db, info, key); err != nil {
			return nil, err
		}
	} else if cfg.Mix.Total() > 0 || len(cfg.Queries)+len(cfg.Background) > 0 {
		// Captured statements need no key: their parameters come from the columns they name.
		return nil, fmt.Errorf("%s has no primary key or unique NOT NULL key to draw keys from", info.QuotedName())
	}
	m := cfg.Mix
	if m.Select > 0 {
		w.ops = append(w.ops, selectOp(info, key, w.keys, m.Select))
	}
	if m.Update > 0 {
		o, err := updateOp(ctx, db, info, key, w.keys, m.Update)
		if err != nil {
			return nil, err
		}
		w.ops = append(w.ops, o)
	}
	if m.Insert > 0 {
		o, err := insertOp(ctx, db, info, key, w.keys, m.Insert)
		if err != nil {
			return nil, err
		}
		w.ops = append(w.ops, o)
	}
	if m.Delete > 0 {
		w.ops = append(w.ops, op{name: "delete", weight: m.Delete,
			sql:  fmt.Sprintf("DELETE FROM %s WHERE %s", info.QuotedName(), keyWhere(key)),
			args: w.keys.appendKey})
	}
	if cfg.Captured != nil {
		ops, bg, stats, err := capturedOps(ctx, db, info, t, w.keys, cfg.Captured, cfg)
		if err != nil {
			return nil, err
		}
		if ops, err = calibrate(ctx, db, t, ops, stats, cfg.Seed); err != nil {
			return nil, err
		}
		if bg, err = calibrateLoops(ctx, db, t, bg, stats, cfg.Seed); err != nil {
			return nil, err
		}
		w.ops, w.background, w.replay = append(w.ops, ops...), append(w.background, bg...), stats
	}
	for _, q := range cfg.Queries {
		o, err := templateOp(q, t, w.keys)
		if err != nil {
			return nil, err
		}
		w.ops = append(w.ops, o)
	}
	for _, q := range cfg.Background {
		o, err := templateOp(q, t, w.keys)
		if err != nil {
			return nil, err
		}
		w.background = append(w.background, o)
	}
	for _, o := range w.ops {
		w.total += o.weight
		w.weights = append(w.weights, o.weight)
	}
	if w.total == 0 && cfg.Captured != nil {
		return nil, fmt.Errorf("none of the %d captured statements could be replayed on %s (%s): give --mix S:U:I or --query",
			len(w.replay), dbconn.QualifiedName(t.Schema, t.Table), notReplayedSummary(w.replay))
	}
	if w.total == 0 {
		return nil, fmt.Errorf("the mix %s has no statements: give weights or --query", m)
	}
	return w, nil
}

func keyWhere(key table.Index) string {
	parts := make([]string, len(key.Columns))
	for i, c := range key.Columns {
		parts[i] = dbconn.QuoteIdent(c.Name) + " = ?"
	}
	return strings.Join(parts, " AND ")
}

func selectOp(info *table.Info, key table.Index, keys keySource, weight int) op {
	var cols []string
	for _, c := range info.Columns {
		if !largeTypes[strings.ToLower(c.DataType)] {
			cols = append(cols, dbconn.QuoteIdent(c.Name))
		}
	}
	if len(cols) == 0 {
		for _, c := range key.Columns {
			cols = append(cols, dbconn.QuoteIdent(c.Name))
		}
	}
	return op{name: "select", weight: weight, rows: true, args: keys.appendKey,
		sql: fmt.Sprintf("SELECT %s FROM %s WHERE %s", strings.Join(cols, ", "), info.QuotedName(), keyWhere(key))}
}

// indexedColumns are the columns that appear in any index (lower-cased).
func indexedColumns(info *table.Info) map[string]bool {
	m := map[string]bool{}
	for _, ix := range info.Indexes {
		for _, c := range ix.Columns {
			m[strings.ToLower(c.Name)] = true
		}
	}
	return m
}

// updateOp sets one non-key column. It prefers an integer column outside every index (a counter
// such as coins or last_seen: the common hot-table write), then any other non-indexed column, then
// a non-unique indexed one. Integer columns get 0..99, which fits every integer type; other types
// get a value from an existing row, which the column is known to accept.
func updateOp(ctx context.Context, db *sql.DB, info *table.Info, key table.Index, keys keySource, weight int) (op, error) {
	indexed := indexedColumns(info)
	inKey := map[string]bool{}
	for _, c := range key.Columns {
		inKey[strings.ToLower(c.Name)] = true
	}
	var best *table.Column
	rank := 99
	for i := range info.Columns {
		c := &info.Columns[i]
		lc := strings.ToLower(c.Name)
		if inKey[lc] || c.Generated || c.AutoIncrement() {
			continue
		}
		r := 3
		switch {
		case !indexed[lc] && isIntegerType(c.DataType):
			r = 0
		case !indexed[lc]:
			r = 1
		case !uniqueColumn(info, lc):
			r = 2
		}
		if r < rank {
			best, rank = c, r
		}
	}
	if best == nil || rank == 3 {
		return op{}, fmt.Errorf("%s has no non-key column to UPDATE; use a mix without updates (e.g. --mix 16:0:1)", info.QuotedName())
	}
	q := fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s", info.QuotedName(), dbconn.QuoteIdent(best.Name), keyWhere(key))
	if isIntegerType(best.DataType) {
		return op{name: "update", weight: weight, sql: q, args: func(r *rand.Rand, args []any) []any {
			return keys.appendKey(r, append(args, r.Int64N(100)))
		}}, nil
	}
	vals, err := sampleValues(ctx, db, info, []string{best.Name})
	if err != nil {
		return op{}, err
	}
	return op{name: "update", weight: weight, sql: q, args: func(r *rand.Rand, args []any) []any {
		return keys.appendKey(r, append(args, vals[r.IntN(len(vals))][0]))
	}}, nil
}

func uniqueColumn(info *table.Info, lc string) bool {
	for _, ix := range info.Indexes {
		if !ix.Unique {
			continue
		}
		for _, c := range ix.Columns {
			if strings.ToLower(c.Name) == lc {
				return true
			}
		}
	}
	return false
}

// sampleValues reads up to insertSamples rows of the given columns.
func sampleValues(ctx context.Context, db *sql.DB, info *table.Info, cols []string) ([][]any, error) {
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = dbconn.QuoteIdent(c)
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s LIMIT %d", strings.Join(quoted, ", "), info.QuotedName(), insertSamples))
	if err != nil {
		return nil, fmt.Errorf("sample rows of %s: %w", info.QuotedName(), err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals, err := dbconn.ScanValues(rows, len(cols))
		if err != nil {
			return nil, fmt.Errorf("sample rows of %s: %w", info.QuotedName(), err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sample rows of %s: %w", info.QuotedName(), err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s is empty: the benchmark needs rows", info.QuotedName())
	}
	return out, nil
}

// insertOp adds a row whose values come from an existing row, letting AUTO_INCREMENT assign the
// id as the application does. Columns of unique indexes get fresh values (see freshValues).
func insertOp(ctx context.Context, db *sql.DB, info *table.Info, key table.Index, keys keySource, weight int) (op, error) {
	var cols []table.Column
	for _, c := range info.CopyColumns() {
		if !c.AutoIncrement() {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		return op{name: "insert", weight: weight, sql: fmt.Sprintf("INSERT INTO %s () VALUES ()", info.QuotedName()),
			args: func(r *rand.Rand, args []any) []any { return args }}, nil
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	samples, err := sampleValues(ctx, db, info, names)
	if err != nil {
		return op{}, err
	}
	fresh, err := freshValues(info, cols, keys)
	if err != nil {
		return op{}, err
	}
	quoted := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = dbconn.QuoteIdent(c.Name)
		marks[i] = "?"
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", info.QuotedName(), strings.Join(quoted, ", "), strings.Join(marks, ", "))
	return op{name: "insert", weight: weight, sql: q, args: func(r *rand.Rand, args []any) []any {
		row := samples[r.IntN(len(samples))]
		for i, v := range row {
			if fresh[i] != nil {
				v = fresh[i](r)
			}
			args = append(args, v)
		}
		return args
	}}, nil
}

// freshValues returns for each column a maker of new unique values, or nil to keep the sampled
// value: columns of unique indexes get fresh values (integers from a shared counter above the key
// range, strings random hex) so inserts do not fail on duplicates.
func freshValues(info *table.Info, cols []table.Column, keys keySource) ([]func(r *rand.Rand) any, error) {
	uniq := map[string]bool{}
	for _, ix := range info.Indexes {
		if ix.Unique {
			for _, c := range ix.Columns {
				uniq[strings.ToLower(c.Name)] = true
			}
		}
	}
	fresh := make([]func(r *rand.Rand) any, len(cols))
	next := new(atomic.Int64)
	if ir, ok := keys.(intRange); ok {
		next.Store(ir.max)
	}
	next.Add(1 << 20) // start above the key range so unique integers do not collide with rows
	for i, c := range cols {
		if !uniq[strings.ToLower(c.Name)] {
			continue
		}
		switch {
		case isIntegerType(c.DataType):
			fresh[i] = func(*rand.Rand) any { return next.Add(1) }
		case strings.Contains(strings.ToLower(c.DataType), "char") || strings.Contains(strings.ToLower(c.DataType), "binary"):
			n := int(c.OctetLength)
			if n > 16 {
				n = 16
			}
			if n < 4 {
				return nil, fmt.Errorf("%s: unique column %s is too short to invent new values; use a mix without inserts (e.g. --mix 16:7:0)", info.QuotedName(), c.Name)
			}
			fresh[i] = func(r *rand.Rand) any { return randomHex(r, n) }
		default:
			return nil, fmt.Errorf("%s: cannot invent values for unique column %s (%s); use a mix without inserts (e.g. --mix 16:7:0)", info.QuotedName(), c.Name, c.ColumnType)
		}
	}
	return fresh, nil
}

const hexDigits = "0123456789abcdef"

func randomHex(r *rand.Rand, n int) string {
	var b [16]byte
	for i := 0; i < n; i++ {
		b[i] = hexDigits[r.IntN(16)]
	}
	return string(b[:n])
}

func templateOp(q Template, t Target, keys keySource) (op, error) {
	refSchema, ref := t.ref()
	sqlText, err := q.Bind(refSchema, ref, t.Schema, t.Table)
	if err != nil {
		return op{}, err
	}
	n := q.Params()
	o := op{name: q.Name, weight: q.Weight, sql: sqlText, rows: q.ReadOnly()}
	if n == 0 {
		o.args = func(_ *rand.Rand, args []any) []any { return args }
	} else {
		o.args = func(r *rand.Rand, args []any) []any { return keys.appendSpan(r, args, n) }
	}
	return o, nil
}
