package table

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// ShadowDDL is how the InnoDB shadow of a MyISAM table is built.
type ShadowDDL struct {
	// Create makes the shadow with its columns, the copy key and any index that must exist from
	// the start (SPATIAL, the index that carries AUTO_INCREMENT), and with its first deferred
	// FULLTEXT index, which DropFulltext removes again.
	Create string
	// DropFulltext, when set, runs right after Create, on the empty shadow: it drops the FULLTEXT
	// index Create built only for the hidden document id it brings (see deferrable).
	DropFulltext string
	// Deferred are index definitions (as in SHOW CREATE TABLE, e.g. "KEY `k` (`a`)") added after the
	// copy: maintaining secondary indexes in random order during the copy is most of its cost;
	// building them afterwards, online, is several times cheaper (docs/how-it-works/copy.md).
	// AddIndexesDDL turns them into ALTERs.
	Deferred []string
	// Changes lists what differs from the source besides the engine, for reports.
	Changes []string
	// RowID: the shadow has RowIDColumn.
	RowID bool
}

// myisamOnlyOptions are table options that mean nothing to InnoDB (or change it, like
// KEY_BLOCK_SIZE, which turns on compression) and are left out of the shadow.
var myisamOnlyOptions = []string{"PACK_KEYS", "CHECKSUM", "DELAY_KEY_WRITE", "MAX_ROWS", "MIN_ROWS",
	"AVG_ROW_LENGTH", "KEY_BLOCK_SIZE", "PAGE_CHECKSUM", "TRANSACTIONAL", "INSERT_METHOD"}

var (
	charsetRe   = regexp.MustCompile(`DEFAULT CHARSET=(\w+)`)
	collateRe   = regexp.MustCompile(`COLLATE=(\w+)`)
	rowFormatRe = regexp.MustCompile(`ROW_FORMAT=(\w+)`)
	partEngRe   = regexp.MustCompile(`ENGINE\s*=\s*(MyISAM|Aria|MRG_MyISAM)`)
)

// Shadow derives the DDL of the shadow table named name from the source's SHOW CREATE TABLE; with
// rowID (for a table that CanAddRowID) the shadow gets RowIDColumn as its primary key.
// SHOW CREATE TABLE prints one column or index per line, two spaces in, and the table options on
// the line that closes the parenthesis; the rewrite relies only on that layout.
func (t *Info) Shadow(name string, deferIndexes, rowID bool) (ShadowDDL, error) {
	var d ShadowDDL
	lines := strings.Split(t.CreateSQL, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "CREATE TABLE") {
		return d, fmt.Errorf("unexpected SHOW CREATE TABLE output for %s", t.QuotedName())
	}
	closeAt := -1
	for i := 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], ")") {
			closeAt = i
			break
		}
	}
	if closeAt < 0 {
		return d, fmt.Errorf("unexpected SHOW CREATE TABLE output for %s: no closing parenthesis", t.QuotedName())
	}
	key, hasKey := t.addressKey()
	qualified := dbconn.QualifiedName(t.Schema, name)
	var body []string
	for _, raw := range lines[1:closeAt] {
		line := strings.TrimSuffix(strings.TrimSpace(raw), ",")
		if !deferIndexes || !t.deferrable(line, key, hasKey) {
			body = append(body, "  "+line)
			continue
		}
		d.Deferred = append(d.Deferred, line)
		if ft, ok := fulltextName(line); ok && d.DropFulltext == "" {
			body = append(body, "  "+line) // for the document id alone: see deferrable
			d.DropFulltext = fmt.Sprintf("ALTER TABLE %s DROP INDEX %s", qualified, dbconn.QuoteIdent(ft))
		}
	}
	if rowID && t.CanAddRowID() {
		for _, l := range rowIDDefinitions() {
			body = append(body, "  "+l)
		}
		d.RowID = true
	}
	opts, changes := t.shadowOptions(lines[closeAt])
	d.Changes = changes
	if d.RowID {
		d.Changes = append(d.Changes, "invisible primary key "+RowIDColumn+" added (the table has no unique key)")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (\n%s\n) %s", qualified, strings.Join(body, ",\n"), opts)
	if rest := strings.Join(lines[closeAt+1:], "\n"); strings.TrimSpace(rest) != "" {
		// Partitioning: every partition names its engine.
		b.WriteString("\n" + partEngRe.ReplaceAllString(rest, "ENGINE = InnoDB"))
	}
	d.Create = b.String()
	return d, nil
}

// deferrable says whether an index line is built after the copy, the one rule for it: ordinary
// BTREE indexes that are not the copy key and do not carry the AUTO_INCREMENT column (InnoDB
// requires that index to exist, error 1075), and FULLTEXT indexes. A FULLTEXT index is added in
// place without rebuilding the table only where the table already has InnoDB's hidden document
// id (FTS_DOC_ID and its unique index): a table created with a FULLTEXT index keeps them when the
// index is dropped, so the shadow is created with one and drops it (ShadowDDL.DropFulltext). The
// build takes LOCK=SHARED, LOCK=NONE being refused: writes to the shadow wait for it, reads do
// not (AddIndexesDDL). SPATIAL indexes stay: nothing measured their cost in the copy.
func (t *Info) deferrable(line string, key Index, hasKey bool) bool {
	var name string
	switch {
	case strings.HasPrefix(line, "KEY "):
		name = line[len("KEY "):]
	case strings.HasPrefix(line, "UNIQUE KEY "):
		name = line[len("UNIQUE KEY "):]
	case strings.HasPrefix(line, fulltextPrefix):
		name = line[len(fulltextPrefix):]
	default:
		return false // columns, PRIMARY KEY, SPATIAL, CONSTRAINT
	}
	ixName, ok := leadingIdent(name)
	if !ok {
		return false
	}
	if hasKey && ixName == key.Name {
		return false
	}
	for _, ix := range t.Indexes {
		if ix.Name != ixName {
			continue
		}
		if len(ix.Columns) > 0 {
			if c, ok := t.Column(ix.Columns[0].Name); ok && c.AutoIncrement() {
				return false
			}
		}
		return ix.Type == "BTREE" || ix.Type == "HASH" || ix.Type == "FULLTEXT"
	}
	return false
}

// fulltextPrefix starts a FULLTEXT index's line in SHOW CREATE TABLE (MariaDB and MySQL alike).
const fulltextPrefix = "FULLTEXT KEY "

// IsFulltext says whether an index definition (ShadowDDL.Deferred) is a FULLTEXT index.
func IsFulltext(def string) bool { return strings.HasPrefix(def, fulltextPrefix) }

// fulltextName is the name of a FULLTEXT index definition, ok false for any other line.
func fulltextName(def string) (string, bool) {
	if !IsFulltext(def) {
		return "", false
	}
	return leadingIdent(def[len(fulltextPrefix):])
}

// leadingIdent parses a backquoted identifier at the start of s.
func leadingIdent(s string) (string, bool) {
	if !strings.HasPrefix(s, "`") {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] == '`' {
			if i+1 < len(s) && s[i+1] == '`' {
				b.WriteByte('`')
				i++
				continue
			}
			return b.String(), true
		}
		b.WriteByte(s[i])
	}
	return "", false
}

// shadowOptions rebuilds the table options for InnoDB: charset, collation and comment carry over,
// AUTO_INCREMENT carries the source's next value, MyISAM-only options are dropped.
func (t *Info) shadowOptions(closeLine string) (string, []string) {
	var changes []string
	opts := []string{"ENGINE=InnoDB"}
	if t.AutoIncrement > 0 {
		opts = append(opts, fmt.Sprintf("AUTO_INCREMENT=%d", t.AutoIncrement))
	}
	if m := charsetRe.FindStringSubmatch(closeLine); m != nil {
		opts = append(opts, "DEFAULT CHARSET="+m[1])
	}
	if m := collateRe.FindStringSubmatch(closeLine); m != nil {
		opts = append(opts, "COLLATE="+m[1])
	} else if t.Collation != "" {
		opts = append(opts, "COLLATE="+t.Collation)
	}
	if m := rowFormatRe.FindStringSubmatch(closeLine); m != nil {
		// MyISAM ignores COMPACT/REDUNDANT, but InnoDB would honour them and bring back its
		// 767-byte key limit; the shadow always takes InnoDB's default (DYNAMIC).
		changes = append(changes, fmt.Sprintf("ROW_FORMAT=%s replaced by the InnoDB default (DYNAMIC)", m[1]))
	}
	for _, o := range myisamOnlyOptions {
		if strings.Contains(closeLine, " "+o+"=") {
			changes = append(changes, o+" dropped (MyISAM-only)")
		}
	}
	if strings.Contains(closeLine, "DATA DIRECTORY=") || strings.Contains(closeLine, "INDEX DIRECTORY=") {
		changes = append(changes, "DATA/INDEX DIRECTORY dropped: the InnoDB table lives in the datadir")
	}
	if t.Comment != "" {
		opts = append(opts, "COMMENT="+dbconn.QuoteString(t.Comment))
	}
	return strings.Join(opts, " "), changes
}

// IndexBuild is one ALTER TABLE that adds deferred indexes to the shadow.
type IndexBuild struct {
	DDL string
	// Fulltext: the ALTER adds one FULLTEXT index (InnoDB builds them one at a time), in place
	// and without a rebuild (see deferrable), with LOCK=SHARED: writes to the table wait until it
	// ends. Its session decides the index's stopwords, for the rows written after it too.
	Fulltext bool
}

// AddIndexesDDL builds the ALTERs that add the deferred indexes to table name: one per FULLTEXT
// index first, then one online ALTER (LOCK=NONE) of all the others, last, so that whatever runs
// beside that one never waits for the shadow behind a FULLTEXT build.
func AddIndexesDDL(schema, name string, defs []string) []IndexBuild {
	table := dbconn.QualifiedName(schema, name)
	var builds []IndexBuild
	var adds []string
	for _, d := range defs {
		if _, ft := fulltextName(d); ft {
			builds = append(builds, IndexBuild{DDL: fmt.Sprintf("ALTER TABLE %s ADD %s, ALGORITHM=INPLACE, LOCK=SHARED", table, d), Fulltext: true})
			continue
		}
		adds = append(adds, "ADD "+d)
	}
	if len(adds) > 0 {
		builds = append(builds, IndexBuild{DDL: fmt.Sprintf("ALTER TABLE %s %s, ALGORITHM=INPLACE, LOCK=NONE", table, strings.Join(adds, ", "))})
	}
	return builds
}

// IndexDefinitionName returns the index name of a definition line such as "UNIQUE KEY `u` (`a`)"
// or "FULLTEXT KEY `ft` (`b`)".
func IndexDefinitionName(def string) (string, bool) {
	rest := strings.TrimPrefix(def, "UNIQUE ")
	rest = strings.TrimPrefix(rest, "FULLTEXT ")
	rest = strings.TrimPrefix(rest, "KEY ")
	return leadingIdent(rest)
}
