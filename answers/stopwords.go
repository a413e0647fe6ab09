package answers

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// MyISAM and InnoDB ignore different words in a FULLTEXT index: MyISAM its built-in list (or
// ft_stopword_file), InnoDB its own shorter list (or a table named by innodb_ft_server_stopword_table
// or innodb_ft_user_stopword_table when the index is built). An InnoDB index built with a table of
// MyISAM's stopwords ignores the same words, and searches for them answer the same. MyISAM's list
// cannot be read from SQL, so it is found by asking MyISAM: the distinct words of the table's
// FULLTEXT columns go into a MyISAM probe table with a FULLTEXT index, and a boolean search for
// all of them (no operators: any word) returns the rows of the words it indexes; the others are
// its stopwords. Only words found in the rows read count: a stopword no row holds changes no
// answer until a row holds it (rows written after the conversion can bring one).

// StopwordSampleRows bounds the rows read for the table's words.
const StopwordSampleRows = 200000

// ftWordRe is a word as MyISAM's parser sees one: letters, digits, underscores and apostrophes.
var ftWordRe = regexp.MustCompile(`[\pL\pN_']+`)

// FulltextColumns lists the columns of the table's FULLTEXT indexes (none: no index).
func FulltextColumns(ti *table.Info) []string {
	seen := map[string]bool{}
	var out []string
	for _, ix := range ti.Indexes {
		if ix.Type != "FULLTEXT" {
			continue
		}
		for _, c := range ix.ColumnNames() {
			if !seen[strings.ToLower(c)] {
				seen[strings.ToLower(c)] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// wordSet collects the distinct words of text values.
type wordSet map[string]bool

func (w wordSet) add(v []byte) {
	for _, word := range ftWordRe.FindAllString(strings.ToLower(string(v)), -1) {
		if word = strings.Trim(word, "'"); word != "" && len(word) <= 84 {
			w[word] = true
		}
	}
}

// tableWords reads the distinct words of the table's FULLTEXT columns from up to maxRows rows,
// batch by batch through a handler (the live table is held for one batch at a time).
func tableWords(ctx context.Context, db *sql.DB, ti *table.Info, maxRows int64) (wordSet, error) {
	cols := FulltextColumns(ti)
	words := wordSet{}
	if len(cols) == 0 {
		return words, nil
	}
	pos := map[int]bool{}
	for i, c := range ti.Columns {
		for _, f := range cols {
			if strings.EqualFold(c.Name, f) {
				pos[i] = true
			}
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer conn.Raw(func(any) error { return errBadConn })
	err = handlerRead(ctx, conn, ti, maxRows, func(rows [][]any) error {
		for _, r := range rows {
			for i := range pos {
				if b, ok := r[i].([]byte); ok {
					words.add(b)
				}
			}
		}
		return nil
	})
	if err == errMoreRows {
		err = nil // a sample: the words of the first maxRows rows
	}
	return words, err
}

// myisamStopwords asks MyISAM which of words it ignores (see above), through a probe table in
// scratch, and returns them sorted.
func myisamStopwords(ctx context.Context, db *sql.DB, scratch, table string, words wordSet) ([]string, error) {
	if len(words) == 0 {
		return nil, nil
	}
	probe := dbconn.QualifiedName(scratch, strings.TrimSuffix(stopwordTableName(table), "_ftstop")+"_ftprobe") // one per table: runs side by side (--parallel)
	for _, s := range []string{"CREATE DATABASE IF NOT EXISTS " + dbconn.QuoteIdent(scratch), "DROP TABLE IF EXISTS " + probe,
		"CREATE TABLE " + probe + " (w VARCHAR(84) NOT NULL, FULLTEXT (w)) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("stopword probe: %w", err)
		}
	}
	defer db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+probe)
	all := make([]string, 0, len(words))
	for w := range words {
		all = append(all, w)
	}
	sort.Strings(all)
	indexed := map[string]bool{}
	const batch = 500
	for i := 0; i < len(all); i += batch {
		part := all[i:min(i+batch, len(all))]
		args := make([]any, len(part))
		for j, w := range part {
			args[j] = w
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO "+probe+" (w) VALUES "+strings.TrimSuffix(strings.Repeat("(?),", len(part)), ","), args...); err != nil {
			return nil, fmt.Errorf("stopword probe: %w", err)
		}
		// Words hold no boolean operator (ftWordRe): without one, any word matches.
		rows, err := db.QueryContext(ctx, "SELECT w FROM "+probe+" WHERE MATCH (w) AGAINST (? IN BOOLEAN MODE)", strings.Join(part, " "))
		if err != nil {
			return nil, fmt.Errorf("stopword probe: %w", err)
		}
		got, err := scanAll(rows, 0)
		if err != nil {
			return nil, fmt.Errorf("stopword probe: %w", err)
		}
		for _, r := range got {
			indexed[string(r[0].([]byte))] = true
		}
		if _, err := db.ExecContext(ctx, "TRUNCATE TABLE "+probe); err != nil {
			return nil, fmt.Errorf("stopword probe: %w", err)
		}
	}
	var stop []string
	for _, w := range all {
		if !indexed[w] {
			stop = append(stop, w)
		}
	}
	return stop, nil
}

// StopwordTable names the InnoDB table of MyISAM's stopwords for a table's FULLTEXT indexes, in
// the form innodb_ft_user_stopword_table takes (db/name), or "" when it has none to give.
type StopwordTable string

// PrepareStopwords finds the words MyISAM ignores among those of schema.name's FULLTEXT columns and
// writes them to an InnoDB table in into (created or replaced, named after the table). "" when the
// table has no FULLTEXT index. Build the InnoDB FULLTEXT indexes with CreateWithStopwords.
func PrepareStopwords(ctx context.Context, db *sql.DB, ti *table.Info, into, scratch string) (StopwordTable, error) {
	if len(FulltextColumns(ti)) == 0 {
		return "", nil
	}
	words, err := tableWords(ctx, db, ti, StopwordSampleRows)
	if err != nil {
		return "", fmt.Errorf("read the table's words: %w", err)
	}
	stop, err := myisamStopwords(ctx, db, scratch, ti.Name, words)
	if err != nil {
		return "", err
	}
	name := stopwordTableName(ti.Name)
	q := dbconn.QualifiedName(into, name)
	for _, s := range []string{"CREATE DATABASE IF NOT EXISTS " + dbconn.QuoteIdent(into), "DROP TABLE IF EXISTS " + q,
		"CREATE TABLE " + q + " (value VARCHAR(84) NOT NULL DEFAULT '') ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return "", fmt.Errorf("stopword table: %w", err)
		}
	}
	for i := 0; i < len(stop); i += 500 {
		part := stop[i:min(i+500, len(stop))]
		args := make([]any, len(part))
		for j, w := range part {
			args[j] = w
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO "+q+" (value) VALUES "+strings.TrimSuffix(strings.Repeat("(?),", len(part)), ","), args...); err != nil {
			return "", fmt.Errorf("stopword table: %w", err)
		}
	}
	return StopwordTable(into + "/" + name), nil
}

// FindStopwords returns the stopword table PrepareStopwords wrote into into for ti, "" when there is
// none (a resumed run builds its FULLTEXT indexes with the table its first part prepared).
func FindStopwords(ctx context.Context, db *sql.DB, ti *table.Info, into string) (StopwordTable, error) {
	name := stopwordTableName(ti.Name)
	there, err := table.Exists(ctx, db, into, name)
	if err != nil || !there {
		return "", err
	}
	return StopwordTable(into + "/" + name), nil
}

// stopwordTableName names the stopword table of a table's FULLTEXT indexes.
func stopwordTableName(table string) string {
	if len(table) > 50 {
		table = table[:50]
	}
	return table + "_ftstop"
}

// CreateWithStopwords runs ddl (a CREATE or ALTER that builds FULLTEXT indexes) in a session whose
// innodb_ft_user_stopword_table is st, so the indexes ignore MyISAM's stopwords; with st "" it
// runs ddl as it is. The session that builds an index decides its stopwords, also for the rows
// written after the build (seen on MariaDB 10.11, 11.8 and MySQL 9.7): a table created with them
// whose index is dropped and added again gets InnoDB's own list unless the ADD runs here too.
func CreateWithStopwords(ctx context.Context, db *sql.DB, st StopwordTable, ddl string) error {
	if st == "" {
		_, err := db.ExecContext(ctx, ddl)
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer conn.Raw(func(any) error { return errBadConn }) // never back to the pool with the setting
	if _, err := conn.ExecContext(ctx, "SET SESSION innodb_ft_user_stopword_table = ?", string(st)); err != nil {
		return fmt.Errorf("use MyISAM's stopwords (%s): %w", st, err)
	}
	_, err = conn.ExecContext(ctx, ddl)
	return err
}
