package answers

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"sort"
	"strconv"
	"strings"
)

var errBadConn = driver.ErrBadConn

// errTooManyRows: an answer larger than the check compares.
var errTooManyRows = errors.New("answer too large to compare")

// scanAll reads every row as raw values ([]byte, nil for NULL), at most limit rows (0: no limit).
func scanAll(rows *sql.Rows, limit int) ([][]any, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]any
	for rows.Next() {
		if limit > 0 && len(out) == limit {
			return nil, errTooManyRows
		}
		raw := make([]sql.RawBytes, len(cols))
		dest := make([]any, len(cols))
		for i := range raw {
			dest[i] = &raw[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make([]any, len(cols))
		for i, v := range raw {
			if v != nil {
				row[i] = append([]byte{}, v...)
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// key spells a row so that two rows are equal exactly when their values are: each value's length
// before its bytes, NULL apart from every string.
func key(row []any) string {
	var b strings.Builder
	for _, v := range row {
		if v == nil {
			b.WriteString("N;")
			continue
		}
		bs := v.([]byte)
		b.WriteString("V" + strconv.Itoa(len(bs)))
		b.WriteByte(':')
		b.Write(bs)
	}
	return b.String()
}

// keys spells every row (in their order).
func keys(rows [][]any) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = key(r)
	}
	return out
}

// sameMultiset reports whether a and b hold the same rows, as many times each.
func sameMultiset(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := append([]string{}, a...), append([]string{}, b...)
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// sameList reports whether a and b hold the same rows in the same order.
func sameList(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
