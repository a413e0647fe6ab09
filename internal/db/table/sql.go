package table

import (
	"fmt"
	"slices"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// SQL builds every statement that moves rows between a source table and its target (the shadow
// during apply, the kept original during rollback): chunk bounds, range copies, row upserts and
// deletes by key, checksums, and the repairs of verification. It is the one place such SQL is
// spelled, so copy, replay, verify and resume cannot drift apart (they once did: verify read
// without FORCE INDEX). Statements are built once; values always travel as placeholders.
type SQL struct {
	src, dst  string    // qualified names
	srcTable  [2]string // the source's schema and name, unquoted
	forceKey  string    // "FORCE INDEX (`k`)"
	stage     string    // the qualified stage table of staged chunks (stage.go)
	key       []string  // quoted key columns
	keyPos    []int     // positions of the key columns in cols
	cols      []string  // quoted copy columns
	colList   string
	keyList   string
	intKey    bool   // single integer key column
	sumRow    string // the expression a row is checksummed by (checksumRow)
	IntKeyCol []bool // per key column: its values travel as integers (a keyless key's ENUM: numbers)

	keyNames []string // unquoted key columns
	noKey    bool     // no unique key: rows are addressed by content (keyless.go)
	fulltext bool     // the target has (or will have) a FULLTEXT index: see OneRowUpserts
	keyNull  []bool   // per key column: NULLable (a keyless table's chunk key may be)
	keyOrder *KeyOrder
	keyPH    []string   // per key column, its placeholder in a range predicate (nil: all "?")
	keyEnum  []int      // per key column, an ENUM's number of members (keyPart)
	enumOf   [][]string // per key column, an ENUM's member names (keyPart)
	// enumKey: a keyed table's key has an ENUM column. Its ranges are then spelled as a keyless
	// chunk key's are (keyPart): a comparison of an ENUM with a name compares text, not the
	// member numbers its index is ordered by, so the range optimizer scans the whole index for
	// every chunk, and a walk in index order cuts chunks of any size (the first one once held two
	// thirds of a table).
	enumKey  bool
	keySel   []string // per keyless chunk-key column, how Bound reads it (an ENUM as its number)
	nullable []bool   // per copy column, for matching by content
	matchPH  []string // per copy column, its placeholder in a match by content (keyless.go, match)
}

// WriteMode is how copied rows meet rows already in the target.
type WriteMode int

const (
	// Replace overwrites: the copy's row is newer than what replay wrote before it (binlog capture).
	Replace WriteMode = iota
	// InsertIgnore keeps the target's row: a row a capture trigger wrote is newer than the copy's.
	InsertIgnore
)

func (s *SQL) verb(w WriteMode) string {
	if s.noKey {
		// Without a unique key REPLACE and INSERT IGNORE would insert all the same.
		return "INSERT INTO "
	}
	if w == InsertIgnore {
		return "INSERT IGNORE INTO "
	}
	return "REPLACE INTO "
}

// NewSQL prepares the statements that copy src (its copy columns, by its copy key) into the table
// named target in the same schema.
func NewSQL(src *Info, target string) (*SQL, error) {
	s := &SQL{src: src.QuotedName(), srcTable: [2]string{src.Schema, src.Name}, dst: dbconn.QualifiedName(src.Schema, target),
		stage: dbconn.QualifiedName(src.Schema, StageTable)}
	for _, c := range src.CopyColumns() {
		s.cols = append(s.cols, dbconn.QuoteIdent(c.Name))
		s.nullable = append(s.nullable, c.Nullable)
		s.matchPH = append(s.matchPH, matchPlaceholder(c))
	}
	s.sumRow = checksumRow(src.CopyColumns())
	for _, ix := range src.Indexes {
		s.fulltext = s.fulltext || ix.Type == "FULLTEXT"
	}
	s.colList = strings.Join(s.cols, ",")
	key, ok := src.CopyKey()
	if !ok {
		s.keyless(src)
		s.keyList = strings.Join(s.key, ",")
		return s, nil
	}
	s.forceKey = "FORCE INDEX (" + dbconn.QuoteIdent(key.Name) + ")"
	s.keyNames = key.ColumnNames()
	for _, k := range key.ColumnNames() {
		s.key = append(s.key, dbconn.QuoteIdent(k))
		col, _ := src.Column(k)
		s.IntKeyCol = append(s.IntKeyCol, col.IsInteger())
		s.keyNull, s.keyPH = append(s.keyNull, col.Nullable), append(s.keyPH, "?")
		names := col.EnumNames()
		s.keyEnum, s.enumOf, s.enumKey = append(s.keyEnum, len(names)), append(s.enumOf, names), s.enumKey || names != nil
		found := false
		for i, c := range src.CopyColumns() {
			if strings.EqualFold(c.Name, k) {
				s.keyPos, found = append(s.keyPos, i), true
			}
		}
		if !found {
			return nil, fmt.Errorf("key column %q of %s is not copied", k, src.QuotedName())
		}
	}
	s.intKey = len(s.key) == 1 && s.IntKeyCol[0]
	s.keyList = strings.Join(s.key, ",")
	return s, nil
}

// Columns is the number of copied columns (the width of a row image).
func (s *SQL) Columns() int { return len(s.cols) }

// KeyPositions are the indexes of the key columns within a row image.
func (s *SQL) KeyPositions() []int { return s.keyPos }

// IntKey reports a single integer key column: the only keys Go can order exactly like the server
// (string keys follow collations).
func (s *SQL) IntKey() bool { return s.intKey }

// Target is the qualified target table.
func (s *SQL) Target() string { return s.dst }

// Source is the qualified source table.
func (s *SQL) Source() string { return s.src }

// SourceTable is the source's schema and name, unquoted.
func (s *SQL) SourceTable() (schema, name string) { return s.srcTable[0], s.srcTable[1] }

// Range is the half-open key range (Lo, Hi]; a nil end is open. Where renders it.
type Range struct{ Lo, Hi []any }

// Where renders the range as a predicate on the key columns (qualified by alias when given) and
// its arguments.
func (s *SQL) Where(r Range, alias string) (string, []any) {
	var conds []string
	var args []any
	add := func(p string, a []any) { conds, args = append(conds, p), append(args, a...) }
	switch {
	case s.noKey || s.enumKey:
		parts := s.keyParts(alias)
		if r.Lo != nil {
			add(afterKey(parts, r.Lo))
		}
		if r.Hi != nil {
			add(upToKey(parts, r.Hi))
		}
	default:
		key := s.key
		if alias != "" {
			key = make([]string, len(s.key))
			for i, k := range s.key {
				key[i] = alias + "." + k
			}
		}
		if r.Lo != nil {
			add(AfterPredicate(key), AfterArgs(r.Lo))
		}
		if r.Hi != nil {
			add("NOT "+AfterPredicate(key), AfterArgs(r.Hi))
		}
	}
	if len(conds) == 0 {
		return "1=1", nil
	}
	return strings.Join(conds, " AND "), args
}

// Bound finds the key of the n-th row after lo (lo nil: from the start), reading only the key
// index; its one argument after the range's is the OFFSET (n-1).
func (s *SQL) Bound(lo []any) (string, []any) {
	where, args := s.Where(Range{Lo: lo}, "")
	sel := s.keyList
	if s.noKey {
		sel = strings.Join(s.keySel, ",")
	}
	return "SELECT " + sel + " FROM " + s.src + " " + s.forceKey + " WHERE " + where +
		" ORDER BY " + s.keyList + " LIMIT 1 OFFSET ?", args
}

// Probe reads the source's first key by its index: the cheapest read an application does on the
// table, which queues behind the copy's table lock and for a core as the application's do
// (throttle.Gentle times it). It has no parameters, so it is sent as plain text.
func (s *SQL) Probe() string {
	if len(s.key) == 0 {
		return "SELECT 1 FROM " + s.src + " LIMIT 1"
	}
	return "SELECT " + s.keyList + " FROM " + s.src + " " + s.forceKey + " ORDER BY " + s.keyList + " LIMIT 1"
}

// ReadRange reads the whole rows of r in key order. The text depends only on which ends of r
// are open, so one prepared statement serves every range of a shape (the client-side copy's:
// keyed tables only; a keyless chunk key's ENUM lists its members, as many as the bound asks).
func (s *SQL) ReadRange(r Range) (string, []any) {
	where, args := s.Where(r, "")
	return "SELECT " + s.colList + " FROM " + s.src + " " + s.forceKey + " WHERE " + where +
		" ORDER BY " + s.keyList, args
}

// CopyRange copies the rows of r from source to target in one statement.
func (s *SQL) CopyRange(r Range, mode WriteMode) (string, []any) {
	return s.copyInto(s.verb(mode)+s.dst, r)
}

// copyInto is "<insert> (cols) SELECT cols FROM source" for the rows of r, read in key order.
func (s *SQL) copyInto(insert string, r Range) (string, []any) {
	where, args := s.Where(r, "")
	return insert + " (" + s.colList + ") SELECT " + s.colList + " FROM " + s.src + " " +
		s.forceKey + " WHERE " + where, args
}

// WriteRows writes n whole rows (row images, flattened into the arguments) to the target.
func (s *SQL) WriteRows(n int, mode WriteMode) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", len(s.cols)), ",") + ")"
	var b strings.Builder
	b.Grow(64 + len(s.colList) + n*(len(row)+1))
	b.WriteString(s.verb(mode) + s.dst + " (" + s.colList + ") VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

// OneRowUpserts reports a target with a FULLTEXT index (the shadow has the source's indexes): a
// write into it must never meet an existing row by a unique key in a statement that writes
// several rows. MySQL (9.7 at least; MariaDB does not) then loses the FULLTEXT entries of the rows
// the statement wrote before its last duplicate: the rows are stored, but searches do not find
// them (REPLACE and INSERT ... ON DUPLICATE KEY UPDATE alike; docs/how-it-works/copy.md). So upserts
// into it are one-row statements (binlog.Applier), and repairs delete before they copy (Recopy).
func (s *SQL) OneRowUpserts() bool { return s.fulltext }

// DeleteKeys deletes n keys (their values flattened into the arguments) from the target.
func (s *SQL) DeleteKeys(n int) string { return "DELETE FROM " + s.dst + " WHERE " + s.keysIn(n) }

// DeleteRange deletes the target's rows in r (resume removes what lies above its watermark).
func (s *SQL) DeleteRange(r Range) (string, []any) {
	where, args := s.Where(r, "")
	return "DELETE FROM " + s.dst + " WHERE " + where, args
}

// Checksum counts and checksums r's rows in the source (target false) or the target. No FORCE
// INDEX here, unlike the copy: a checksum reads whole rows in any order, and the optimizer's full
// scan of a large range beats one index lookup per row on MyISAM. The row expression is built
// once, in NewSQL (checksumRow).
func (s *SQL) Checksum(r Range, target bool) (string, []any) {
	tbl := s.src
	if target {
		tbl = s.dst
	}
	where, args := s.Where(r, "")
	// BIT_XOR would cancel a pair of identical rows, which a keyless table may hold: SUM counts them.
	agg := "BIT_XOR"
	if s.noKey {
		agg = "SUM"
	}
	return "SELECT COUNT(*), COALESCE(" + agg + "(" + rowHash(s.sumRow) + "), 0) FROM " + tbl + " WHERE " + where, args
}

// rowHash is a row's 32-bit hash: the CRC32 of the row's string preceded by its own CRC32 in
// decimal. Not the plain CRC32: CRC32 is linear over XOR, so rows of one length changed in the
// same bytes (a counter bumped in two rows, a flag flipped) change their CRC32s by the same
// amount, and an even number of them cancel out under BIT_XOR; a trigger-capture rollback, which
// finds the writes since the cut-over by this checksum, lost 42 such updates in one range
// (TestChecksumSeesTheSameChangeToTwoRows). The decimal text of the inner CRC32 changes with the
// row in no linear way, so neither does the outer one. (MD5 would do, but MySQL 9.7 has none.)
func rowHash(row string) string {
	return "CRC32(CONCAT(CRC32(" + row + "), '#', " + row + "))"
}

// checksumRow is the string a row's hash (rowHash) is taken of: its columns joined by '#', preceded
// by one NULL flag per nullable column, which keeps NULL apart from the empty string (CONCAT_WS
// skips NULLs and would shift a value into its neighbour's place). Character columns are cast to
// BINARY so that their bytes are joined as they are, never converted to a common character set on
// the way; numbers and dates convert to the same text on both sides without it. Source and target
// share column definitions, so both build the same string. Flags and casts only where needed: on
// every column they make the checksum about twice as slow (docs/how-it-works/verification.md, "The
// checksum"); TestChecksumTellsRowsApart keeps what they must tell apart.
func checksumRow(cols []Column) string {
	var vals, nulls []string
	for _, c := range cols {
		q := dbconn.QuoteIdent(c.Name)
		if c.Nullable {
			nulls = append(nulls, "ISNULL("+q+")")
		}
		if c.NumericOrTemporal() {
			vals = append(vals, q)
		} else {
			vals = append(vals, "CAST("+q+" AS BINARY)")
		}
	}
	if len(nulls) > 0 {
		vals = append([]string{"CONCAT(" + strings.Join(nulls, ",") + ")"}, vals...)
	}
	return "CONCAT_WS('#', " + strings.Join(vals, ",") + ")"
}

// DeleteMissing deletes the target's rows in r that the source no longer has. Single-table DELETE
// with NOT EXISTS: a multi-table DELETE resolves its target alias against the session's default
// database, which enginemig's connections do not have. The source is read as alias `s` (LOCK
// TABLES must name it so).
func (s *SQL) DeleteMissing(r Range) (string, []any) {
	where, args := s.Where(r, s.dst)
	join := make([]string, len(s.key))
	for i, k := range s.key {
		join[i] = "s." + k + " = " + s.dst + "." + k
	}
	return "DELETE FROM " + s.dst + " WHERE " + where + " AND NOT EXISTS (SELECT 1 FROM " + s.src +
		" s WHERE " + strings.Join(join, " AND ") + ")", args
}

// keysIn matches n keys: `k` IN (...) for one column, OR-ed equalities otherwise, which the
// range optimizer handles on every supported server version.
func (s *SQL) keysIn(n int) string {
	nullable := slices.Contains(s.keyNull, true)
	if len(s.key) == 1 && !nullable {
		return s.key[0] + " IN (" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
	}
	eq := "=?"
	if nullable {
		eq = " <=> ?" // a keyless chunk key may hold NULLs
	}
	one := "(" + strings.Join(s.key, eq+" AND ") + eq + ")"
	return strings.TrimSuffix(strings.Repeat(one+" OR ", n), " OR ")
}
