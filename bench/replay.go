package bench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	capture "github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Replaying captured statements: each placeholder is bound from the data of the table under test
// (a scratch copy in the gates), so that a replayed statement touches about as many rows as the
// production one did: equality values are drawn from the column's rows (so hot values come up as
// often as they occur), a range gets bounds that enclose as many rows as production's statements
// examined on average, an IN list has the example's size (or as many values as production's rows
// examined need), and a LIMIT the example's value (or production's mean rows sent).

// maxColumnSample bounds the values read per column. Reads take no ORDER BY: on a live table a
// sort would hold MyISAM's read lock; values are sorted here instead.
const maxColumnSample = 100000

// columnSample is one column's values in the table under test, sorted.
type columnSample struct {
	vals     []any
	distinct int
}

func loadColumn(ctx context.Context, db *sql.DB, info *table.Info, col table.Column) (*columnSample, error) {
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s IS NOT NULL LIMIT %d", dbconn.QuoteIdent(col.Name), info.QuotedName(),
		dbconn.QuoteIdent(col.Name), maxColumnSample)
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sample column %s of %s: %w", col.Name, info.QuotedName(), err)
	}
	defer rows.Close()
	s := &columnSample{}
	numeric := isIntegerType(col.DataType) || isDecimalType(col.DataType)
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("sample column %s of %s: %w", col.Name, info.QuotedName(), err)
		}
		s.vals = append(s.vals, typedValue(raw, col.DataType, numeric))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sample column %s of %s: %w", col.Name, info.QuotedName(), err)
	}
	sort.Slice(s.vals, func(i, j int) bool { return less(s.vals[i], s.vals[j]) })
	for i := range s.vals {
		if i == 0 || less(s.vals[i-1], s.vals[i]) {
			s.distinct++
		}
	}
	return s, nil
}

func isDecimalType(t string) bool {
	switch strings.ToLower(t) {
	case "decimal", "float", "double", "numeric", "real":
		return true
	}
	return false
}

// typedValue makes text-protocol bytes comparable: integers and decimals as numbers (so that 10
// sorts after 9), everything else as bytes (dates and times sort correctly as text).
func typedValue(raw []byte, dataType string, numeric bool) any {
	if numeric {
		if isIntegerType(dataType) {
			if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
				return n
			}
			if n, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
				return n
			}
		}
		if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
			return f
		}
	}
	return append([]byte(nil), raw...)
}

func less(a, b any) bool {
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return x < y
		}
	case uint64:
		if y, ok := b.(uint64); ok {
			return x < y
		}
	case float64:
		if y, ok := b.(float64); ok {
			return x < y
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y) < 0
		}
	}
	return fmt.Sprint(a) < fmt.Sprint(b)
}

// rowsPerValue is how many rows share one value on average.
func (s *columnSample) rowsPerValue() float64 {
	if s.distinct == 0 {
		return 1
	}
	return float64(len(s.vals)) / float64(s.distinct)
}

// binder makes the arguments of one replayed statement.
type binder struct {
	ctx     context.Context
	db      *sql.DB
	info    *table.Info
	keys    keySource
	columns map[string]*columnSample
	err     error
}

// column returns the named column's sample, or nil when the table has no such column (a column
// of another table in a join) or it cannot be read (the error is kept for the caller).
func (b *binder) column(name string) *columnSample {
	c, ok := b.info.Column(name)
	if !ok || name == "" {
		return nil
	}
	k := strings.ToLower(c.Name)
	if s, ok := b.columns[k]; ok {
		return s
	}
	s, err := loadColumn(b.ctx, b.db, b.info, c)
	if err != nil && b.err == nil {
		b.err = err
	}
	b.columns[k] = s
	return s
}

// listSize is capture.ListSize: the example's size, else enough values to examine as many rows
// as production did on average (1..1000), else 1.
func (b *binder) listSize(st capture.Statement) capture.ListSize {
	return func(col string, example int) int {
		if example > 0 {
			return example
		}
		mean := st.MeanRowsExamined()
		s := b.column(col)
		if mean <= 0 || s == nil {
			return 1
		}
		return int(math.Max(1, math.Min(1000, math.Round(mean/s.rowsPerValue()))))
	}
}

// argState is what the placeholders of one execution share: a range's upper bound, drawn with
// its lower bound, and the sampled row an INSERT's values come from.
type argState struct {
	hi  any
	row []any
}

// argFunc is one placeholder's value maker.
type argFunc func(r *rand.Rand, st *argState) any

// bindParams builds the arguments function of a shaped statement.
func (b *binder) bindParams(st capture.Statement, params []capture.Param) (func(r *rand.Rand, args []any) []any, error) {
	width := 100
	if mean := st.MeanRowsExamined(); mean > 0 {
		width = int(math.Max(1, math.Round(mean)))
	}
	fns := make([]argFunc, len(params))
	paired := make([]bool, len(params)) // a lower bound whose upper bound follows
	for i, p := range params {
		for j := i + 1; j < len(params) && p.Kind == capture.ParamLower; j++ {
			if params[j].Kind == capture.ParamUpper && strings.EqualFold(params[j].Column, p.Column) {
				paired[i] = true
				break
			}
		}
	}
	values, err := b.valueRow(params)
	if err != nil {
		return nil, err
	}
	for i, p := range params {
		fns[i] = b.paramFunc(st, p, paired[i], width, values, i)
	}
	if b.err != nil {
		return nil, b.err
	}
	return func(r *rand.Rand, args []any) []any {
		var state argState
		for _, f := range fns {
			args = append(args, f(r, &state))
		}
		return args
	}, nil
}

func (b *binder) paramFunc(st capture.Statement, p capture.Param, paired bool, width int, values func(*rand.Rand, *argState, int) any, i int) argFunc {
	lit := func(def any) argFunc {
		v := literalValue(p.Example, def)
		return func(*rand.Rand, *argState) any { return v }
	}
	s := b.column(p.Column)
	if s != nil && len(s.vals) == 0 {
		s = nil
	}
	switch p.Kind {
	case capture.ParamEq:
		if s == nil {
			return lit(int64(1))
		}
		return func(r *rand.Rand, _ *argState) any { return s.vals[r.IntN(len(s.vals))] }
	case capture.ParamLower:
		if s == nil {
			return lit(int64(1))
		}
		w := min(width, len(s.vals))
		if !paired {
			return func(*rand.Rand, *argState) any { return s.vals[len(s.vals)-w] }
		}
		return func(r *rand.Rand, st *argState) any {
			pos := r.IntN(len(s.vals) - w + 1)
			st.hi = s.vals[pos+w-1]
			return s.vals[pos]
		}
	case capture.ParamUpper:
		if s == nil {
			return lit(int64(1))
		}
		w := min(width, len(s.vals))
		return func(_ *rand.Rand, st *argState) any {
			if st.hi != nil {
				v := st.hi
				st.hi = nil
				return v
			}
			return s.vals[w-1]
		}
	case capture.ParamValue:
		return func(r *rand.Rand, st *argState) any { return values(r, st, i) }
	case capture.ParamLimit:
		def := int64(10)
		if sent := st.MeanRowsSent(); sent > 0 {
			def = int64(math.Max(1, math.Min(10000, math.Round(sent))))
		}
		return lit(def)
	case capture.ParamOffset:
		return lit(int64(0))
	}
	return lit(int64(1))
}

// literalValue reads an example's literal: a number, or a quoted string; def when there is none.
func literalValue(lit string, def any) any {
	if lit == "" {
		return def
	}
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(lit, 64); err == nil {
		return f
	}
	if len(lit) >= 2 && (lit[0] == '\'' || lit[0] == '"') && lit[len(lit)-1] == lit[0] {
		s := lit[1 : len(lit)-1]
		s = strings.ReplaceAll(s, string(lit[0])+string(lit[0]), string(lit[0]))
		return strings.NewReplacer(`\\`, `\`, `\'`, `'`, `\"`, `"`, `\n`, "\n", `\t`, "\t", `\0`, "\x00").Replace(s)
	}
	return def
}

// valueRow returns the maker of an INSERT's VALUES: the i-th parameter's column in one sampled row
// per execution, with fresh values for unique columns (as the built-in INSERT does).
func (b *binder) valueRow(params []capture.Param) (func(*rand.Rand, *argState, int) any, error) {
	var cols []table.Column
	pos := make([]int, len(params)) // parameter -> index in cols
	for i, p := range params {
		if p.Kind != capture.ParamValue {
			continue
		}
		c, ok := b.info.Column(p.Column)
		if !ok {
			return nil, fmt.Errorf("INSERT names column %s, which %s does not have", p.Column, b.info.QuotedName())
		}
		pos[i] = len(cols)
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		return nil, nil
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	samples, err := sampleValues(b.ctx, b.db, b.info, names)
	if err != nil {
		return nil, err
	}
	fresh, err := freshValues(b.info, cols, b.keys)
	if err != nil {
		return nil, err
	}
	return func(r *rand.Rand, st *argState, i int) any {
		if st.row == nil {
			st.row = samples[r.IntN(len(samples))]
		}
		if f := fresh[pos[i]]; f != nil {
			return f(r)
		}
		return st.row[pos[i]]
	}, nil
}
