package binlog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/enginemig/enginemig/internal/db/table"
)

// Kind is what a change does to a row.
type Kind int

const (
	Insert Kind = iota + 1
	Update
	Delete
)

func (k Kind) String() string {
	switch k {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "unknown"
}

// Change is one row change of the migrated table. Before and After hold the copy columns' values
// (table.Info.CopyColumns order); Before is nil for inserts, After nil for deletes.
type Change struct {
	Kind   Kind
	Before []any
	After  []any
	// At is the end of the row event the change was read from: a chunk copied while the source
	// was locked at or after it already holds the change (shadow/order.go, rule 5).
	At Position
}

// rowBytes is what a row image's values weigh: their length for strings and bytes, 8 for the
// rest. It bounds replay's batches and statements, whatever the width of the table's rows.
func rowBytes(row []any) int {
	n := 0
	for _, v := range row {
		switch v := v.(type) {
		case []byte:
			n += len(v)
		case string:
			n += len(v)
		default:
			n += 8
		}
	}
	return n
}

// ErrPartialJSON means a row event holds only a change to a JSON value, not the value: MySQL
// writes such events for InnoDB tables when a session sets binlog_row_value_options=PARTIAL_JSON.
// Replay writes whole rows, so it stops instead of guessing (a rollback's source is InnoDB).
var ErrPartialJSON = errors.New("a partial JSON update is in the binlog (binlog_row_value_options=PARTIAL_JSON); " +
	"replay needs whole values: set binlog_row_value_options='' (global and in the application's sessions)")

// rowMapper maps binlog row images (all table columns, in the server's order) to copy columns.
type rowMapper struct {
	// source[i] is the binlog column index of copy column i.
	source   []int
	unsigned []bool
	types    []string
	nColumns int
	// binaryLen[i] is n for a BINARY(n) copy column, else 0.
	binaryLen []int
}

// newRowMapper resolves columns by name when the event carries names (binlog_row_metadata=FULL),
// else by ordinal position, which is only safe because DDL on the table stops the migration.
func newRowMapper(ti *table.Info, tm *replication.TableMapEvent) (*rowMapper, error) {
	cols := ti.CopyColumns()
	m := &rowMapper{source: make([]int, len(cols)), unsigned: make([]bool, len(cols)), types: make([]string, len(cols)), nColumns: int(tm.ColumnCount)}
	names := tm.ColumnNameString()
	if len(names) > 0 {
		byName := make(map[string]int, len(names))
		for i, n := range names {
			byName[strings.ToLower(n)] = i
		}
		for i, c := range cols {
			idx, ok := byName[strings.ToLower(c.Name)]
			if !ok {
				return nil, fmt.Errorf("binlog row for %s has no column %q: was the table altered during the migration?", ti.QuotedName(), c.Name)
			}
			m.source[i] = idx
		}
	} else {
		if int(tm.ColumnCount) != len(ti.Columns) {
			return nil, fmt.Errorf("binlog row for %s has %d columns, the table has %d: was the table altered during the migration?", ti.QuotedName(), tm.ColumnCount, len(ti.Columns))
		}
		pos := map[string]int{}
		for i, c := range ti.Columns {
			pos[c.Name] = i
		}
		for i, c := range cols {
			m.source[i] = pos[c.Name]
		}
	}
	m.binaryLen = make([]int, len(cols))
	for i, c := range cols {
		m.unsigned[i] = strings.Contains(strings.ToLower(c.ColumnType), "unsigned")
		m.types[i] = strings.ToLower(c.DataType)
		if m.types[i] == "binary" {
			m.binaryLen[i] = int(c.OctetLength)
		}
	}
	return m, nil
}

func (m *rowMapper) mapRow(row []any) ([]any, error) {
	if len(row) != m.nColumns {
		return nil, fmt.Errorf("binlog row has %d values, table map says %d", len(row), m.nColumns)
	}
	out := make([]any, len(m.source))
	for i, src := range m.source {
		v := row[src]
		if _, ok := v.(*replication.JsonDiff); ok {
			return nil, ErrPartialJSON
		}
		if m.unsigned[i] || m.types[i] == "bit" {
			v = toUnsigned(v, m.types[i])
		}
		if n := m.binaryLen[i]; n > 0 {
			v = padBinary(v, n)
		}
		out[i] = v
	}
	return out, nil
}

// padBinary gives a BINARY(n) value its trailing zero bytes back: a row image stores the value
// without them (they are the type's padding), and a replayed DELETE or UPDATE whose key lacks them
// finds no row, so the change would be lost (seen on MySQL 9.7; docs/testing/servers-and-loads.md, "Table shapes").
func padBinary(v any, n int) any {
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	case []byte:
		b = x
	default:
		return v
	}
	if len(b) >= n {
		return v
	}
	return append(append(make([]byte, 0, n), b...), make([]byte, n-len(b))...)
}

// toUnsigned reinterprets signed integers from events without signedness metadata (go-mysql
// converts them itself when binlog_row_metadata=FULL provides it), and BIT values, which go-mysql
// decodes as int64 whatever the metadata: a BIT(64) with its top bit set came out negative, and a
// keyless replay's DELETE or UPDATE, which finds its row by the value, found none.
func toUnsigned(v any, dataType string) any {
	switch x := v.(type) {
	case int8:
		return uint8(x)
	case int16:
		return uint16(x)
	case int32:
		if dataType == "mediumint" {
			// MEDIUMINT is decoded as a sign-extended 24-bit value.
			return uint32(x) & 0xFFFFFF
		}
		return uint32(x)
	case int64:
		return uint64(x)
	}
	return v
}
