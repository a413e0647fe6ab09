package table

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Order is how a chunk-key column's values are placed in the index's order outside the server
// (shadow/order.go, rule 5: a replayed change of a keyless table is written only if its row's
// chunk was read before it). Each kind is exact: a value is never ordered through a float, a
// time zone or a guess at a collation.
type Order int

const (
	// Unordered: not a chunk-key column (a SET orders by its number, which no range predicate
	// uses and which has too many values to list, unlike an ENUM's members; floats are inexact;
	// BLOB and TEXT are indexed by prefixes).
	Unordered Order = iota
	// OrderInt: integers and YEAR, compared as integers of any width (CompareInts).
	OrderInt
	// OrderDecimal: DECIMAL, compared digit by digit from its text.
	OrderDecimal
	// OrderDateTime: DATE, DATETIME and TIMESTAMP (in UTC, as the row sessions and the binlog
	// reader read them), compared as text with the fraction padded to six digits.
	OrderDateTime
	// OrderTime: TIME, which may be negative and past 24 hours, compared in microseconds.
	OrderTime
	// OrderWeight: CHAR and VARCHAR, compared by the weight strings the server computes in the
	// column's collation (KeyOrder.WeightQuery, compareWeights): Go cannot follow a collation.
	OrderWeight
	// OrderEnum: ENUM, ordered by its member's number (its place in the definition; 0 for the
	// error value ''), as its index is, not by its name: read and sent as that number (SQL.Bound,
	// keyPart), as the binlog reader decodes it.
	OrderEnum
)

// maxEnumMembers is the most members an ENUM chunk-key column may have: its ranges are lists of
// member numbers (keyPart), at most this long.
const maxEnumMembers = 1024

// ChunkOrder is the column's Order as a chunk-key column: Unordered when a keyless copy cannot
// walk it.
func (c Column) ChunkOrder() Order {
	if c.Generated || c.IsRowID() {
		return Unordered
	}
	switch strings.ToLower(c.DataType) {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year":
		return OrderInt
	case "decimal", "numeric":
		return OrderDecimal
	case "date", "datetime", "timestamp":
		return OrderDateTime
	case "time":
		return OrderTime
	case "char", "varchar":
		if c.Charset != "" && c.Collation != "" && c.CharLength > 0 {
			return OrderWeight
		}
	case "enum":
		if n := c.EnumMembers(); n > 0 && n <= maxEnumMembers {
			return OrderEnum
		}
	}
	return Unordered
}

// EnumMembers is the number of members of an ENUM column, 0 for another column.
func (c Column) EnumMembers() int { return len(c.EnumNames()) }

// EnumNames is an ENUM column's members in their order (member number i+1 is names[i]), nil for
// another column, read from its type as information_schema spells it (each name quoted, a quote
// in a name doubled).
func (c Column) EnumNames() []string {
	t := c.ColumnType
	if !strings.HasPrefix(strings.ToLower(t), "enum(") {
		return nil
	}
	var names []string
	var name strings.Builder
	quoted := false
	for i := len("enum("); i < len(t); i++ {
		switch {
		case t[i] != '\'':
			if quoted {
				name.WriteByte(t[i])
			}
		case !quoted:
			quoted = true
			name.Reset()
		case i+1 < len(t) && t[i+1] == '\'':
			i++ // a quote doubled inside a name
			name.WriteByte('\'')
		default:
			quoted = false
			names = append(names, name.String())
		}
	}
	return names
}

// enumNumber reads an ENUM's member number as the binlog reader decodes it (an integer) or a
// row session reads it (text).
func enumNumber(v any) (int, bool) {
	m, ok := toSignMag(v)
	if !ok || m.neg || m.mag > maxEnumMembers {
		return 0, false
	}
	return int(m.mag), true
}

// KeyOrder compares chunk-key values (tuples of a keyless table's chunk-key columns) in the
// index's order. NULL sorts first, as in every index. Values come as the row sessions read
// them (text, binary charset) or as the binlog reader decodes them (integers, text).
type KeyOrder struct {
	cols   []Column
	orders []Order
}

// KeyOrder is the order of s's keyless chunk key (nil for a keyed table or one without a key
// to walk).
func (s *SQL) KeyOrder() *KeyOrder { return s.keyOrder }

func newKeyOrder(cols []Column) *KeyOrder {
	o := &KeyOrder{cols: cols, orders: make([]Order, len(cols))}
	for i, c := range cols {
		o.orders[i] = c.ChunkOrder()
	}
	return o
}

// weightExpr is the weight string of a value of c sent as bytes in c's character set: what
// the server orders c's index by, except for trailing spaces (Weigher.SpaceWeight).
func weightExpr(c Column) string {
	return "WEIGHT_STRING(CONVERT(? USING " + c.Charset + ") COLLATE " + c.Collation + ")"
}

// CollationQuery reads what column i's collation does with trailing spaces: 1 or 0 for whether
// it ignores them ('a' = 'a ', PAD SPACE: the server says it, collation names do not), and the
// weight string of one space.
func (o *KeyOrder) CollationQuery(i int) string {
	c := o.cols[i]
	return "SELECT CONVERT('a' USING " + c.Charset + ") COLLATE " + c.Collation + " = CONVERT('a ' USING " + c.Charset + "), " +
		strings.Replace(weightExpr(c), "?", "' '", 1)
}

// Weigher gives the server's weight strings of chunk-key values in weighed columns.
type Weigher interface {
	// Weight is the weight string of column i's value v (never NULL).
	Weight(i int, v any) []byte
	// SpaceWeight is the weight string of a space in column i's collation if it pads with
	// spaces (PAD SPACE), nil if not (NO PAD).
	SpaceWeight(i int) []byte
}

// compareWeights compares two weight strings. In a PAD SPACE collation both are compared as if
// followed by spaces without end: that is how such a collation compares ('a' = 'a ' but
// 'a\t' < 'a'), and what neither the bare WEIGHT_STRING (whose 'a ' weighs more than 'a' on
// MariaDB 10.11 and 11.8 and MySQL 9.7) nor its AS CHAR(n) form (which pads by characters,
// so 'ß' and 'ss' differ on MySQL 9.7) gives.
func compareWeights(a, b, space []byte) int {
	if len(space) == 0 {
		return bytes.Compare(a, b)
	}
	at := func(w []byte, k int) byte {
		if k < len(w) {
			return w[k]
		}
		return space[(k-len(w))%len(space)]
	}
	n := max(len(a), len(b)) + len(space)
	for k := 0; k < n; k++ {
		if x, y := at(a, k), at(b, k); x != y {
			return cmpInt(int64(x), int64(y))
		}
	}
	return 0
}

// Weighed reports whether column i is compared by weight strings.
func (o *KeyOrder) Weighed(i int) bool { return o.orders[i] == OrderWeight }

// Columns is the number of chunk-key columns.
func (o *KeyOrder) Columns() int { return len(o.orders) }

// WeightQuery reads the weights of n values of column i in one row (its arguments: the values).
func (o *KeyOrder) WeightQuery(i, n int) string {
	return "SELECT " + strings.TrimSuffix(strings.Repeat(weightExpr(o.cols[i])+",", n), ",")
}

// Compare orders two chunk-key tuples (which may be prefixes: the shorter one's missing parts
// compare as equal). w is asked only for OrderWeight columns.
func (o *KeyOrder) Compare(a, b []any, w Weigher) (int, error) {
	for i := 0; i < len(o.orders) && i < len(a) && i < len(b); i++ {
		c, err := o.compareOne(i, a[i], b[i], w)
		if err != nil || c != 0 {
			return c, err
		}
	}
	return 0, nil
}

func (o *KeyOrder) compareOne(i int, a, b any, w Weigher) (int, error) {
	switch {
	case a == nil && b == nil:
		return 0, nil
	case a == nil:
		return -1, nil
	case b == nil:
		return 1, nil
	}
	switch o.orders[i] {
	case OrderInt:
		if c, ok := CompareInts(a, b); ok {
			return c, nil
		}
	case OrderDecimal:
		if c, ok := compareDecimals(text(a), text(b)); ok {
			return c, nil
		}
	case OrderDateTime:
		return strings.Compare(normalDateTime(text(a)), normalDateTime(text(b))), nil
	case OrderTime:
		x, aok := timeMicros(text(a))
		y, bok := timeMicros(text(b))
		if aok && bok {
			return cmpInt(x, y), nil
		}
	case OrderWeight:
		return compareWeights(w.Weight(i, a), w.Weight(i, b), w.SpaceWeight(i)), nil
	case OrderEnum:
		x, aok := enumNumber(a)
		y, bok := enumNumber(b)
		if aok && bok {
			return cmpInt(int64(x), int64(y)), nil
		}
	}
	return 0, fmt.Errorf("chunk key column %d: cannot order %v (%T) and %v (%T)", i+1, a, a, b, b)
}

func text(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareDecimals compares two decimal numbers in text ("-12.3400"), exactly, whatever their
// scales.
func compareDecimals(a, b string) (int, bool) {
	an, ai, af, aok := splitDecimal(a)
	bn, bi, bf, bok := splitDecimal(b)
	if !aok || !bok {
		return 0, false
	}
	zero := func(i, f string) bool { return i == "" && f == "" }
	if zero(ai, af) {
		an = false
	}
	if zero(bi, bf) {
		bn = false
	}
	if an != bn {
		if an {
			return -1, true
		}
		return 1, true
	}
	c := cmpInt(int64(len(ai)), int64(len(bi)))
	if c == 0 {
		c = strings.Compare(ai, bi)
	}
	if c == 0 {
		c = strings.Compare(af, bf) // trailing zeros trimmed: plain text order is numeric order
	}
	if an {
		c = -c
	}
	return c, true
}

// splitDecimal splits "-0012.3400" into negative, "12", "34".
func splitDecimal(s string) (neg bool, ip, fp string, ok bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	} else {
		s = strings.TrimPrefix(s, "+")
	}
	ip, fp, _ = strings.Cut(s, ".")
	for _, r := range ip + fp {
		if r < '0' || r > '9' {
			return false, "", "", false
		}
	}
	return neg, strings.TrimLeft(ip, "0"), strings.TrimRight(fp, "0"), ip+fp != ""
}

// normalDateTime pads a DATE, DATETIME or TIMESTAMP text's fraction to six digits: texts of
// one column then order as their values (zero dates first).
func normalDateTime(s string) string {
	if len(s) <= len("2006-01-02") {
		return s
	}
	whole, frac, _ := strings.Cut(s, ".")
	return whole + "." + frac + strings.Repeat("0", max(0, 6-len(frac)))
}

// timeMicros reads a TIME text ("-838:59:59.000000") in microseconds.
func timeMicros(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	parts := strings.Split(whole, ":")
	if len(parts) != 3 || len(frac) > 6 {
		return 0, false
	}
	var v int64
	for _, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return 0, false
		}
		v = v*60 + n
	}
	f := int64(0)
	if frac != "" {
		n, err := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil {
			return 0, false
		}
		f = n
	}
	v = v*1_000_000 + f
	if neg {
		v = -v
	}
	return v, true
}
