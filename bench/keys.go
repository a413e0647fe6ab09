package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// keySource draws random keys that exist (or existed) in the table, so that the benchmark's
// statements hit real rows like the application's do.
type keySource interface {
	// appendKey appends the values of one random key (one per key column).
	appendKey(r *rand.Rand, args []any) []any
	// appendSpan appends n values for template placeholders: k, k+KeySpan, ... for integer keys.
	appendSpan(r *rand.Rand, args []any, n int) []any
	describe() string
}

// intRange is a single integer key: uniform in [min, max], as the application's ids are spread.
type intRange struct{ min, max int64 }

func (k intRange) appendKey(r *rand.Rand, args []any) []any {
	return append(args, k.min+r.Int64N(k.max-k.min+1))
}

func (k intRange) appendSpan(r *rand.Rand, args []any, n int) []any {
	v := k.min + r.Int64N(k.max-k.min+1)
	for i := 0; i < n; i++ {
		args = append(args, v+int64(i)*KeySpan)
	}
	return args
}

func (k intRange) describe() string { return fmt.Sprintf("integer key range [%d, %d]", k.min, k.max) }

// keyList is a sample of real keys, for keys that are not one integer column (strings, composite).
type keyList struct{ keys [][]any }

func (k keyList) appendKey(r *rand.Rand, args []any) []any {
	return append(args, k.keys[r.IntN(len(k.keys))]...)
}

// appendSpan repeats the first key column: a non-integer key has no arithmetic span.
func (k keyList) appendSpan(r *rand.Rand, args []any, n int) []any {
	v := k.keys[r.IntN(len(k.keys))][0]
	for i := 0; i < n; i++ {
		args = append(args, v)
	}
	return args
}

func (k keyList) describe() string { return fmt.Sprintf("sample of %d keys", len(k.keys)) }

// maxKeySample bounds the keys kept in memory for non-integer keys; reading them is one index
// scan, short enough not to hold a MyISAM read lock for long.
const maxKeySample = 100000

func isIntegerType(dataType string) bool {
	switch strings.ToLower(dataType) {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return true
	}
	return false
}

// loadKeys reads the key range (integer key) or a key sample (other keys) of a table.
func loadKeys(ctx context.Context, db *sql.DB, info *table.Info, key table.Index) (keySource, error) {
	cols := make([]string, len(key.Columns))
	for i, c := range key.Columns {
		cols[i] = dbconn.QuoteIdent(c.Name)
	}
	if len(cols) == 1 {
		if c, ok := info.Column(key.Columns[0].Name); ok && isIntegerType(c.DataType) {
			var lo, hi sql.NullInt64
			q := fmt.Sprintf("SELECT MIN(%s), MAX(%s) FROM %s", cols[0], cols[0], info.QuotedName())
			if err := db.QueryRowContext(ctx, q).Scan(&lo, &hi); err != nil {
				return nil, fmt.Errorf("read key range of %s: %w", info.QuotedName(), err)
			}
			if !lo.Valid {
				return nil, fmt.Errorf("%s is empty: the benchmark needs rows to read and update", info.QuotedName())
			}
			return intRange{lo.Int64, hi.Int64}, nil
		}
	}
	q := fmt.Sprintf("SELECT %s FROM %s ORDER BY %s LIMIT %d", strings.Join(cols, ", "), info.QuotedName(),
		strings.Join(cols, ", "), maxKeySample)
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read key sample of %s: %w", info.QuotedName(), err)
	}
	defer rows.Close()
	var kl keyList
	for rows.Next() {
		vals, err := dbconn.ScanValues(rows, len(cols))
		if err != nil {
			return nil, fmt.Errorf("read key sample of %s: %w", info.QuotedName(), err)
		}
		kl.keys = append(kl.keys, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read key sample of %s: %w", info.QuotedName(), err)
	}
	if len(kl.keys) == 0 {
		return nil, fmt.Errorf("%s is empty: the benchmark needs rows to read and update", info.QuotedName())
	}
	return kl, nil
}
