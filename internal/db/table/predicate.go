package table

import (
	"slices"
	"strings"
)

// AfterPredicate is "key > (?,...)" for a key of the given (quoted) columns, spelled as OR-ed
// comparisons, which every server's range optimizer uses (row-constructor comparisons are not
// optimised everywhere): a > ? OR (a = ? AND b > ?) OR ... Arguments come from AfterArgs.
func AfterPredicate(quotedKey []string) string {
	terms := make([]string, len(quotedKey))
	for i := range quotedKey {
		parts := make([]string, 0, i+1)
		for j := 0; j < i; j++ {
			parts = append(parts, quotedKey[j]+" = ?")
		}
		parts = append(parts, quotedKey[i]+" > ?")
		terms[i] = "(" + strings.Join(parts, " AND ") + ")"
	}
	return "(" + strings.Join(terms, " OR ") + ")"
}

// AfterArgs expands a key's values to AfterPredicate's placeholders.
func AfterArgs(key []any) []any {
	var args []any
	for i := range key {
		args = append(args, key[:i+1]...)
	}
	return args
}

// keyPart is how one column of a keyless table's chunk key is compared in a range predicate
// (afterKey, upToKey), in the index's order: NULL first, then the values. Such a key's columns
// may be NULLable; a NULL part of a bound is spelled IS NULL / IS NOT NULL, without an argument,
// and a NULLable column is compared so that a NULL in it makes a term true or false, never NULL
// (a predicate then means the same under NOT: bare comparisons under NOT once left every NULL
// row outside every range).
type keyPart struct {
	col  string // quoted, qualified where the statement needs it
	ph   string // the placeholder of a value ("?" or a CAST of it: placeholder)
	null bool
	// enum is an ENUM's number of members, 0 for another type. An ENUM is ordered by its member's
	// number, and a range comparison of it (e > 2) is a scan on every server (the range optimizer
	// takes only equalities of an ENUM): its ranges are spelled as lists of member numbers
	// (e IN (3,4)), from 0, the number of the error value ''. A bound's part is its number, or
	// its name (a keyed table's key, read as rows are), turned into its number by names.
	enum  int
	names []string
}

// afterKey is AfterPredicate for a keyless table's chunk key: the rows after the key value v.
func afterKey(parts []keyPart, v []any) (string, []any) {
	return keyTerms(parts, v, keyPart.gt, keyPart.gt)
}

// upToKey is the rows at or before the key value v: NOT afterKey, spelled without NOT, because
// the range optimizer turns NOT (e IN (...)) into a scan where e is an ENUM.
func upToKey(parts []keyPart, v []any) (string, []any) {
	return keyTerms(parts, v, keyPart.lt, keyPart.le)
}

// keyTerms is (p0 cmp v0) OR (p0 = v0 AND p1 cmp v1) OR ..., with last for the last part; a part
// whose comparison can hold for no value drops its term (FALSE when none is left).
func keyTerms(parts []keyPart, v []any, cmp, last func(keyPart, any) (string, []any)) (string, []any) {
	var terms []string
	var args, eqArgs []any
	var eqs []string
	for i, p := range parts {
		c := cmp
		if i == len(parts)-1 {
			c = last
		}
		if t, a := c(p, v[i]); t != "" {
			terms = append(terms, "("+strings.Join(append(slices.Clone(eqs), t), " AND ")+")")
			args = append(append(args, eqArgs...), a...)
		}
		t, a := p.eq(v[i])
		eqs, eqArgs = append(eqs, t), append(eqArgs, a...)
	}
	if len(terms) == 0 {
		return "FALSE", nil
	}
	return "(" + strings.Join(terms, " OR ") + ")", args
}

// eq: the column equals x.
func (p keyPart) eq(x any) (string, []any) {
	switch {
	case x == nil:
		return p.col + " IS NULL", nil
	case p.null:
		return p.col + " <=> " + p.placeholder(), []any{p.value(x)}
	}
	return p.col + " = " + p.placeholder(), []any{p.value(x)}
}

// gt: the column is after x ("" if nothing is).
func (p keyPart) gt(x any) (string, []any) {
	if x == nil {
		return p.col + " IS NOT NULL", nil
	}
	t, a := p.compare(">", x)
	if n, ok := p.number(x); ok {
		if t, a = p.inMembers(n+1, p.enum); t == "" {
			return "", nil
		}
	}
	if p.null {
		t = p.col + " IS NOT NULL AND " + t
	}
	return t, a
}

// lt: the column is before x ("" if nothing is).
func (p keyPart) lt(x any) (string, []any) {
	if x == nil {
		return "", nil
	}
	t, a := p.compare("<", x)
	if n, ok := p.number(x); ok {
		t, a = p.inMembers(0, n-1)
	}
	return p.orNull(t), a
}

// le: the column is at or before x.
func (p keyPart) le(x any) (string, []any) {
	if x == nil {
		return p.col + " IS NULL", nil
	}
	t, a := p.compare("<=", x)
	if n, ok := p.number(x); ok {
		t, a = p.inMembers(0, n)
	}
	return p.orNull(t), a
}

// orNull adds the NULLs (which sort first) to t, the values before a bound ("": none).
func (p keyPart) orNull(t string) string {
	switch {
	case !p.null:
		return t
	case t == "":
		return p.col + " IS NULL"
	}
	return "(" + p.col + " IS NULL OR " + t + ")"
}

// compare is the column op x. An ENUM's bound is compared as a member number (e + 0), a form
// the range optimizer does not use: only for a bound that is not an integer, which no bound a
// copy read is (SQL.Bound reads member numbers; number).
func (p keyPart) compare(op string, x any) (string, []any) {
	if p.enum > 0 {
		return p.col + " + 0 " + op + " ?", []any{x}
	}
	return p.col + " " + op + " " + p.placeholder(), []any{x}
}

// number is an ENUM bound's member number (ok false for another column, or a bound that is
// neither an integer nor one of its names).
func (p keyPart) number(x any) (int, bool) {
	if p.enum == 0 {
		return 0, false
	}
	if n, ok := enumNumber(x); ok {
		return n, true
	}
	return enumByName(p.names, x)
}

// enumByName is the member number of the ENUM member named x (the empty name is 0, the error
// value): the name as spelled in the definition, else one equal to it but for letter case (MySQL
// keeps a member's spelling; a case-insensitive collation matches it either way).
func enumByName(names []string, x any) (int, bool) {
	var v string
	switch t := x.(type) {
	case string:
		v = t
	case []byte:
		v = string(t)
	default:
		return 0, false
	}
	if v == "" {
		return 0, true
	}
	if i := slices.Index(names, v); i >= 0 {
		return i + 1, true
	}
	for i, n := range names {
		if strings.EqualFold(n, v) {
			return i + 1, true
		}
	}
	return 0, false
}

// inMembers is an ENUM column's IN list of the member numbers from..to ("": none).
func (p keyPart) inMembers(from, to int) (string, []any) {
	var args []any
	for m := max(from, 0); m <= min(to, p.enum); m++ {
		args = append(args, int64(m))
	}
	if len(args) == 0 {
		return "", nil
	}
	return p.col + " IN (" + strings.TrimSuffix(strings.Repeat("?,", len(args)), ",") + ")", args
}

func (p keyPart) placeholder() string {
	if p.ph == "" {
		return "?"
	}
	return p.ph
}

// value is x as sent: an ENUM's member number as an integer, so that it is compared as one
// (as text it would be compared with the member's name).
func (p keyPart) value(x any) any {
	if n, ok := p.number(x); ok {
		return int64(n)
	}
	return x
}
