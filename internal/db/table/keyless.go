package table

import (
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Tables without a usable unique key (CopyKey finds none) are copied and replayed by content:
// a row is whatever its values are, and identical rows are interchangeable copies of one value.
// The statements here keep the multiset of rows: an insert adds one copy, a delete or update
// changes exactly one copy (LIMIT 1), and verification counts duplicates (SUM, not BIT_XOR, of
// the row checksums). How they stay in step with the copy is shadow/order.go's rule 5.

// ChunkKey is the index a keyless table's copy walks and its replay finds rows by, cut to its
// walkable leading columns: those whose order rule 5 can follow outside the server
// (Column.ChunkOrder: integers, DECIMAL, temporal types, CHAR and VARCHAR in their collation,
// ENUM), up to the first that is not or is indexed by a prefix. NULLable columns walk too (NULL sorts
// first). Of the indexes with a walkable first column it takes the one whose walkable columns
// the index statistics say are the most distinct (the shortest runs of equal values: a chunk
// cannot end inside such a run), then the one with more walkable columns. ok is false when no
// index starts with a walkable column: the table is then copied in one chunk, and a replayed
// change is found by a scan of the target.
func (t *Info) ChunkKey() (Index, bool) {
	var best Index
	var bestCard int64
	for _, ix := range t.Indexes {
		if ix.Type != "BTREE" {
			continue
		}
		n := 0
		for _, kc := range ix.Columns {
			c, ok := t.Column(kc.Name)
			if !ok || kc.SubPart > 0 || c.ChunkOrder() == Unordered {
				break
			}
			n++
		}
		if n == 0 {
			continue
		}
		card := ix.Columns[n-1].Cardinality
		if ix.Unique && n == len(ix.Columns) && card == 0 {
			card = t.Rows // a unique index with NULLable columns, not yet counted: nearly a row each
		}
		if len(best.Columns) == 0 || card > bestCard || card == bestCard && n > len(best.Columns) {
			best, bestCard = ix, card
			best.Columns = ix.Columns[:n:n]
		}
	}
	return best, len(best.Columns) > 0
}

// Keyless reports a table without a usable unique key (see CopyKey).
func (t *Info) Keyless() bool {
	_, ok := t.CopyKey()
	return !ok
}

// addressKey is the index that must exist on the target while rows are copied and replayed:
// the copy key, or a keyless table's chunk key.
func (t *Info) addressKey() (Index, bool) {
	if k, ok := t.CopyKey(); ok {
		return k, true
	}
	return t.ChunkKey()
}

// keyless prepares s for a table without a unique key: ranges over the chunk key's walkable
// columns, or none (one range, the whole table).
func (s *SQL) keyless(src *Info) {
	s.noKey = true
	ix, ok := src.ChunkKey()
	if !ok {
		return
	}
	s.forceKey = "FORCE INDEX (" + dbconn.QuoteIdent(ix.Name) + ")"
	var cols []Column
	for _, name := range ix.ColumnNames() {
		c, _ := src.Column(name)
		cols = append(cols, c)
		s.key, s.keyNames = append(s.key, dbconn.QuoteIdent(name)), append(s.keyNames, name)
		order := c.ChunkOrder()
		s.IntKeyCol = append(s.IntKeyCol, order == OrderInt || order == OrderEnum)
		s.keyNull = append(s.keyNull, c.Nullable)
		s.keyPH = append(s.keyPH, placeholder(c))
		sel, members := dbconn.QuoteIdent(name), 0
		if order == OrderEnum {
			// Its number, as the index orders it (MySQL gives e + 0 as a DOUBLE).
			sel, members = "CAST("+sel+" AS UNSIGNED)", c.EnumMembers()
		}
		s.keySel, s.keyEnum, s.enumOf = append(s.keySel, sel), append(s.keyEnum, members), append(s.enumOf, c.EnumNames())
		for i, cc := range src.CopyColumns() {
			if strings.EqualFold(cc.Name, name) {
				s.keyPos = append(s.keyPos, i)
			}
		}
	}
	s.intKey = len(s.key) == 1 && cols[0].ChunkOrder() == OrderInt && !s.keyNull[0]
	s.keyOrder = newKeyOrder(cols)
}

// keyParts is the chunk key's columns as range predicates compare them (qualified by alias when
// given).
func (s *SQL) keyParts(alias string) []keyPart {
	parts := make([]keyPart, len(s.key))
	for i, k := range s.key {
		if alias != "" {
			k = alias + "." + k
		}
		parts[i] = keyPart{col: k, ph: s.keyPH[i], null: s.keyNull[i], enum: s.keyEnum[i], names: s.enumOf[i]}
	}
	return parts
}

// placeholder is how a value of c is sent where it is compared with the column: a DECIMAL cast
// to the column's type, so that the two are compared as decimals. The documented rule for a
// string and a DECIMAL is a comparison as doubles, inexact past 15 digits; the servers convert a
// constant compared with a column to the column's type instead (exact on MariaDB 10.11, 11.8 and
// MySQL 9.7), but only where the constant stands alone (d = ? + 0 matches both of two values that
// differ in their 20th digit), which the CAST makes the rule.
func placeholder(c Column) string {
	switch strings.ToLower(c.DataType) {
	case "decimal", "numeric":
		t, _, _ := strings.Cut(strings.ToLower(c.ColumnType), " ") // without unsigned or zerofill
		return "CAST(? AS " + t + ")"
	}
	return "?"
}

// matchPlaceholder is how a value of c is sent in a match by content (match): character columns
// as bytes (BINARY ?), so a case-insensitive collation cannot match a row that differs in case or
// trailing spaces; DECIMAL ones as decimals (placeholder).
func matchPlaceholder(c Column) string {
	if c.ComparesByCollation() {
		return "BINARY ?"
	}
	return placeholder(c)
}

// Keyless reports a source without a unique key: rows are addressed by content.
func (s *SQL) Keyless() bool { return s.noKey }

// Chunked reports a key to walk in ranges; without one the copy is one range.
func (s *SQL) Chunked() bool { return len(s.key) > 0 }

// match is the predicate that finds a row of the target by its whole content (the optimizer picks
// the index: the chunk key's or any other), each column compared exactly (matchPlaceholder); <=>
// where NULL is possible. Its arguments are the row image itself.
func (s *SQL) match() string {
	terms := make([]string, len(s.cols))
	for i, c := range s.cols {
		op := " = "
		if s.nullable[i] {
			op = " <=> "
		}
		terms[i] = c + op + s.matchPH[i]
	}
	return strings.Join(terms, " AND ")
}

// DeleteOne deletes one copy of a row from the target (arguments: the row image). Which copy does
// not matter: they are equal in every column.
func (s *SQL) DeleteOne() string {
	return "DELETE FROM " + s.dst + " WHERE " + s.match() + " LIMIT 1"
}

// UpdateOne changes one copy of a row in the target (arguments: the new row, then the old one).
func (s *SQL) UpdateOne() string {
	return "UPDATE " + s.dst + " SET " + strings.Join(s.cols, " = ?, ") + " = ? WHERE " + s.match() + " LIMIT 1"
}

// Stmt is one statement with its arguments.
type Stmt struct {
	SQL  string
	Args []any
}

// Recopy makes the target's rows of r equal to the source's, in a session that holds both
// locked: recopy then delete what the source no longer has (by key), or, keyless, delete the
// range then copy it (without a key a copied row cannot tell it is already there). A target with
// a FULLTEXT index is also emptied first, so the copy meets none of its rows (OneRowUpserts).
func (s *SQL) Recopy(r Range) []Stmt {
	if s.noKey || s.fulltext {
		del, dargs := s.DeleteRange(r)
		cp, cargs := s.CopyRange(r, Replace)
		return []Stmt{{del, dargs}, {cp, cargs}}
	}
	cp, cargs := s.CopyRange(r, Replace)
	del, dargs := s.DeleteMissing(r)
	return []Stmt{{cp, cargs}, {del, dargs}}
}
