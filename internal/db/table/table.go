// Package table reads what enginemig needs to know about one table (columns, indexes, the key
// used to address rows, size, options) and derives the names and DDL of its shadow table.
package table

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Querier is what Load needs: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier = dbconn.Querier

// ErrNotFound means the table (or view) does not exist.
var ErrNotFound = errors.New("table not found")

// Column is one column as information_schema describes it.
type Column struct {
	Name       string `json:"name"`
	DataType   string `json:"data_type"`   // e.g. int, varchar
	ColumnType string `json:"column_type"` // e.g. int(10) unsigned
	Nullable   bool   `json:"nullable"`
	Extra      string `json:"extra,omitempty"`
	Charset    string `json:"charset,omitempty"`
	Collation  string `json:"collation,omitempty"`
	// OctetLength is the maximum byte length of string types (CHARACTER_OCTET_LENGTH).
	OctetLength int64 `json:"octet_length,omitempty"`
	// CharLength is the maximum length in characters of string types (CHARACTER_MAXIMUM_LENGTH).
	CharLength int64 `json:"char_length,omitempty"`
	// Generated columns are computed by the server and must not be copied.
	Generated bool `json:"generated,omitempty"`
}

// AutoIncrement reports whether the column is the table's AUTO_INCREMENT column.
func (c Column) AutoIncrement() bool {
	return strings.Contains(strings.ToLower(c.Extra), "auto_increment")
}

// IsInteger reports an integer type, whose values Go compares exactly as the server does.
func (c Column) IsInteger() bool {
	switch strings.ToLower(c.DataType) {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return true
	}
	return false
}

// NumericOrTemporal reports a number or date/time type: a value without a character set, whose
// text (in CONCAT_WS, say) depends on nothing but the value and the column's definition.
func (c Column) NumericOrTemporal() bool {
	if c.IsInteger() {
		return true
	}
	switch strings.ToLower(c.DataType) {
	case "decimal", "numeric", "float", "double", "real", "date", "datetime", "timestamp", "time", "year":
		return c.Charset == ""
	}
	return false
}

// ComparesByCollation reports a character column, whose = may match values that differ in case,
// accents or trailing spaces. ENUM and SET have a character set but compare (and replay) by their
// numbers.
func (c Column) ComparesByCollation() bool {
	switch strings.ToLower(c.DataType) {
	case "enum", "set":
		return false
	}
	return c.Charset != ""
}

// IndexColumn is one key part.
type IndexColumn struct {
	Name    string `json:"name"`
	SubPart int64  `json:"sub_part,omitempty"` // prefix length in characters, 0 for the whole column
	// Cardinality is the index statistics' estimate of distinct values of the key parts up to
	// this one (0: unknown).
	Cardinality int64 `json:"cardinality,omitempty"`
}

// Index is one index of the table.
type Index struct {
	Name    string        `json:"name"`
	Unique  bool          `json:"unique"`
	Type    string        `json:"type"` // BTREE, HASH, FULLTEXT, SPATIAL
	Columns []IndexColumn `json:"columns"`
}

// ColumnNames lists the key parts' column names.
func (ix Index) ColumnNames() []string {
	out := make([]string, len(ix.Columns))
	for i, c := range ix.Columns {
		out[i] = c.Name
	}
	return out
}

// Info describes one table.
type Info struct {
	Schema        string   `json:"schema"`
	Name          string   `json:"table"`
	Type          string   `json:"type"` // BASE TABLE, VIEW, SYSTEM VIEW
	Engine        string   `json:"engine"`
	RowFormat     string   `json:"row_format"`
	Rows          int64    `json:"rows"`
	DataLength    int64    `json:"data_length"`
	IndexLength   int64    `json:"index_length"`
	AutoIncrement int64    `json:"auto_increment,omitempty"`
	Collation     string   `json:"collation"`
	CreateOptions string   `json:"create_options,omitempty"`
	Comment       string   `json:"comment,omitempty"`
	Columns       []Column `json:"columns"`
	Indexes       []Index  `json:"indexes"`
	CreateSQL     string   `json:"-"`
}

// Exists reports whether schema.name is there (a table or a view).
func Exists(ctx context.Context, q Querier, schema, name string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&n)
	return n > 0, err
}

// Load reads a table's description. It returns ErrNotFound (wrapped) when the table is missing.
func Load(ctx context.Context, q Querier, schema, name string) (*Info, error) {
	t := &Info{Schema: schema, Name: name}
	var engine, rowFormat, collation, createOptions, comment sql.NullString
	var rows, dataLen, indexLen, autoInc sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT TABLE_TYPE, ENGINE, ROW_FORMAT, TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH,
		AUTO_INCREMENT, TABLE_COLLATION, CREATE_OPTIONS, TABLE_COMMENT
		FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, schema, name).
		Scan(&t.Type, &engine, &rowFormat, &rows, &dataLen, &indexLen, &autoInc, &collation, &createOptions, &comment)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", dbconn.QualifiedName(schema, name), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read table %s: %w", dbconn.QualifiedName(schema, name), err)
	}
	t.Engine, t.RowFormat, t.Collation = engine.String, rowFormat.String, collation.String
	t.CreateOptions, t.Comment = createOptions.String, comment.String
	t.Rows, t.DataLength, t.IndexLength, t.AutoIncrement = rows.Int64, dataLen.Int64, indexLen.Int64, autoInc.Int64
	if err := t.loadColumns(ctx, q); err != nil {
		return nil, err
	}
	if err := t.loadIndexes(ctx, q); err != nil {
		return nil, err
	}
	if t.Type == "BASE TABLE" {
		var n string
		if err := q.QueryRowContext(ctx, "SHOW CREATE TABLE "+t.QuotedName()).Scan(&n, &t.CreateSQL); err != nil {
			return nil, fmt.Errorf("show create table %s: %w", t.QuotedName(), err)
		}
	}
	return t, nil
}

func (t *Info) loadColumns(ctx context.Context, q Querier) error {
	rows, err := q.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, EXTRA,
		CHARACTER_SET_NAME, COLLATION_NAME, CHARACTER_OCTET_LENGTH, CHARACTER_MAXIMUM_LENGTH, COALESCE(GENERATION_EXPRESSION, '')
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, t.Schema, t.Name)
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", t.QuotedName(), err)
	}
	defer rows.Close()
	for rows.Next() {
		var c Column
		var nullable, genExpr string
		var charset, collation sql.NullString
		var octets, chars sql.NullInt64
		if err := rows.Scan(&c.Name, &c.DataType, &c.ColumnType, &nullable, &c.Extra, &charset, &collation, &octets, &chars, &genExpr); err != nil {
			return err
		}
		c.Nullable = nullable == "YES"
		c.Charset, c.Collation, c.OctetLength, c.CharLength = charset.String, collation.String, octets.Int64, chars.Int64
		extra := strings.ToUpper(c.Extra)
		c.Generated = genExpr != "" || strings.Contains(extra, "GENERATED") || strings.Contains(extra, "VIRTUAL") || strings.Contains(extra, "PERSISTENT")
		t.Columns = append(t.Columns, c)
	}
	return rows.Err()
}

func (t *Info) loadIndexes(ctx context.Context, q Querier) error {
	rows, err := q.QueryContext(ctx, `SELECT INDEX_NAME, NON_UNIQUE, INDEX_TYPE, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART, CARDINALITY
		FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`, t.Schema, t.Name)
	if err != nil {
		return fmt.Errorf("read indexes of %s: %w", t.QuotedName(), err)
	}
	defer rows.Close()
	byName := map[string]*Index{}
	var order []string
	for rows.Next() {
		var name, typ string
		var nonUnique, seq int
		var col sql.NullString
		var sub, card sql.NullInt64
		if err := rows.Scan(&name, &nonUnique, &typ, &seq, &col, &sub, &card); err != nil {
			return err
		}
		ix := byName[name]
		if ix == nil {
			ix = &Index{Name: name, Unique: nonUnique == 0, Type: typ}
			byName[name] = ix
			order = append(order, name)
		}
		ix.Columns = append(ix.Columns, IndexColumn{Name: col.String, SubPart: sub.Int64, Cardinality: card.Int64})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// PRIMARY first, then by name: a stable order for DDL and output.
	sort.SliceStable(order, func(i, j int) bool {
		if order[i] == "PRIMARY" || order[j] == "PRIMARY" {
			return order[i] == "PRIMARY"
		}
		return order[i] < order[j]
	})
	for _, n := range order {
		t.Indexes = append(t.Indexes, *byName[n])
	}
	return nil
}

// QuotedName is `schema`.`table`.
func (t *Info) QuotedName() string { return dbconn.QualifiedName(t.Schema, t.Name) }

// Column returns the named column (case-insensitive, as MySQL compares column names).
func (t *Info) Column(name string) (Column, bool) {
	for _, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return c, true
		}
	}
	return Column{}, false
}

// CopyKey chooses the index that addresses rows during the copy and replay: the PRIMARY KEY, or
// else the unique index with the fewest columns whose columns are all NOT NULL and not prefixes
// (a prefix does not identify a row). ok is false when there is none.
func (t *Info) CopyKey() (Index, bool) {
	var best *Index
	for i := range t.Indexes {
		ix := &t.Indexes[i]
		if !ix.Unique || ix.Type == "FULLTEXT" || ix.Type == "SPATIAL" {
			continue
		}
		usable := true
		for _, kc := range ix.Columns {
			c, ok := t.Column(kc.Name)
			if !ok || c.Nullable || kc.SubPart > 0 || c.Generated || c.IsRowID() {
				usable = false
				break
			}
		}
		if !usable {
			continue
		}
		if ix.Name == "PRIMARY" {
			return *ix, true
		}
		if best == nil || len(ix.Columns) < len(best.Columns) {
			best = ix
		}
	}
	if best == nil {
		return Index{}, false
	}
	return *best, true
}

// AutoIncrementColumn is the table's AUTO_INCREMENT column, if it has one (at most one).
func (t *Info) AutoIncrementColumn() (Column, bool) {
	for _, c := range t.Columns {
		if c.AutoIncrement() {
			return c, true
		}
	}
	return Column{}, false
}

// CopyColumns are the columns whose values are copied and replayed (generated ones are computed,
// and apply's own row id is numbered by each table for itself).
func (t *Info) CopyColumns() []Column {
	var out []Column
	for _, c := range t.Columns {
		if !c.Generated && !c.IsRowID() {
			out = append(out, c)
		}
	}
	return out
}

// MaxNameLength is MySQL's identifier limit; shadow names must fit in it.
const MaxNameLength = 64

// OwnSchemaPrefix begins the names of the databases enginemig keeps its own tables in (the state
// schema, _enginemig by default).
const OwnSchemaPrefix = "_enginemig"

// OwnTableName is the name of enginemig's own table name (its state, its heartbeat) in schema:
// name itself in a database of enginemig's own, and _enginemig_<name> in any other (an
// application's, where an account limited to one database keeps its state), which no
// application's table is called (an application's own `migrations` table is common).
func OwnTableName(schema, name string) string {
	if strings.HasPrefix(schema, OwnSchemaPrefix) {
		return name
	}
	return OwnSchemaPrefix + "_" + name
}

// ShadowName is the InnoDB copy built during the migration.
func ShadowName(name string) string { return "_" + name + "_new" }

// OldName is where the original table is kept after the cut-over.
func OldName(name string) string { return "_" + name + "_old" }

// SwapName is the cut-over sentry's name and the rename target of the swap itself (the original
// is renamed on to OldName right after). It must sort after name: RENAME takes its metadata
// locks in name order, so with the sentry sorting first (as `_t_old` does for lowercase names)
// the rename would wait on the sentry instead of the table, and application writes queued on the
// table could slip into the old table between UNLOCK and RENAME. name + suffix always sorts after
// name, whatever its characters.
func SwapName(name string) string { return name + "_emswap" }

// RunNames are the table and the tables a run on it creates beside it (ShadowName, OldName,
// SwapName): what a run's statements name.
func RunNames(name string) []string {
	return []string{name, ShadowName(name), OldName(name), SwapName(name)}
}

// NamesFit reports whether the shadow and old names fit MySQL's 64-character identifier limit.
func NamesFit(name string) bool {
	return len([]rune(ShadowName(name))) <= MaxNameLength && len([]rune(OldName(name))) <= MaxNameLength &&
		len([]rune(SwapName(name))) <= MaxNameLength
}
