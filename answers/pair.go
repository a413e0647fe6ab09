package answers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Pair is a MyISAM and an InnoDB table holding the same rows: the application's table as it is and
// as it will be. The MyISAM copy keeps the live table's rows in their data-file order, which is
// the order MyISAM answers a statement without ORDER BY in (a copy in key order would hide every
// such difference); the InnoDB copy is made from it, with the DDL the shadow gets.
type Pair struct {
	Schema         string // the scratch database
	MyISAM, InnoDB string
	Rows           int64
	// Partial: the table had more rows than the check copies; answers that depend on every row
	// (FULLTEXT's 50% threshold, COUNT) may differ from the live table's.
	Partial bool
	// Stopwords: the InnoDB copy's FULLTEXT indexes ignore these MyISAM stopwords, as apply's
	// shadow's do ("" without FULLTEXT).
	Stopwords StopwordTable
}

// handlerBatch is how many rows each HANDLER read takes: the live table is read-locked for one
// batch at a time, not for the whole copy.
const handlerBatch = 1000

// BuildPair copies up to maxRows rows of schema.name into scratch (created when missing) as a
// MyISAM and an InnoDB table (whose FULLTEXT indexes, with alignStopwords, ignore MyISAM's
// stopwords as apply's shadow's do). The live table is read with HANDLER ... READ NEXT, batch by batch, in
// its data-file order; writes between batches may make the copy differ from any one moment of
// the live table, which does not matter: both copies hold the same rows. Call Drop when done.
func BuildPair(ctx context.Context, db *sql.DB, scratch, schema, name string, maxRows int64, alignStopwords bool) (*Pair, error) {
	if scratch == schema {
		return nil, fmt.Errorf("the scratch database must not be the table's own database %q", schema)
	}
	info, err := table.Load(ctx, db, schema, name)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(info.Engine, "MyISAM") {
		return nil, fmt.Errorf("%s is %s, not MyISAM: nothing to compare", info.QuotedName(), info.Engine)
	}
	base := name
	if len(base) > 40 {
		base = base[:40]
	}
	p := &Pair{Schema: scratch, MyISAM: base + "_answers_myisam", InnoDB: base + "_answers_innodb"}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+dbconn.QuoteIdent(scratch)); err != nil {
		return nil, fmt.Errorf("create scratch database %s: %w", scratch, err)
	}
	p.Drop(ctx, db) // a leftover of an interrupted check
	m := dbconn.QualifiedName(scratch, p.MyISAM)
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+m+" LIKE "+info.QuotedName()); err != nil {
		return nil, fmt.Errorf("create %s: %w", m, err)
	}
	if err := p.fill(ctx, db, info, m, maxRows); err != nil {
		p.Drop(context.WithoutCancel(ctx), db)
		return nil, err
	}
	copyInfo := *info
	copyInfo.Schema = scratch
	ddl, err := copyInfo.Shadow(p.InnoDB, false, false)
	if err == nil && alignStopwords {
		// The same stopwords apply gives the shadow's FULLTEXT indexes, from the copy's words.
		var mi *table.Info
		if mi, err = table.Load(ctx, db, scratch, p.MyISAM); err == nil {
			p.Stopwords, err = PrepareStopwords(ctx, db, mi, scratch, scratch)
		}
	}
	if err == nil {
		err = CreateWithStopwords(ctx, db, p.Stopwords, ddl.Create)
	}
	if err == nil {
		_, err = db.ExecContext(ctx, "INSERT INTO "+dbconn.QualifiedName(scratch, p.InnoDB)+" SELECT * FROM "+m)
	}
	if err != nil {
		p.Drop(context.WithoutCancel(ctx), db)
		return nil, fmt.Errorf("build the InnoDB copy: %w", err)
	}
	return p, nil
}

// fill reads the live table batch by batch through a handler and appends the rows to m.
func (p *Pair) fill(ctx context.Context, db *sql.DB, info *table.Info, m string, maxRows int64) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer conn.Raw(func(any) error { return errBadConn }) // SET NAMES binary stays with the session
	err = handlerRead(ctx, conn, info, maxRows, func(rows [][]any) error {
		if err := insertRows(ctx, conn, m, rows); err != nil {
			return err
		}
		p.Rows += int64(len(rows))
		return nil
	})
	if err == errMoreRows {
		p.Partial, err = true, nil
	}
	return err
}

// errMoreRows: handlerRead stopped at maxRows with rows left.
var errMoreRows = errors.New("more rows than read")

// handlerRead reads info's rows in their data-file order through a handler on conn, a batch at a
// time (the table is held for one batch), and gives each batch to fn: at most maxRows rows (0: all;
// errMoreRows when rows are left). conn is switched to the binary character set: bytes travel
// unchanged both ways, so conn must not go back to the pool.
func handlerRead(ctx context.Context, conn *sql.Conn, info *table.Info, maxRows int64, fn func([][]any) error) error {
	if _, err := conn.ExecContext(ctx, "SET NAMES binary"); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "HANDLER "+info.QuotedName()+" OPEN AS `_enginemig_answers`"); err != nil {
		return fmt.Errorf("read %s with HANDLER: %w", info.QuotedName(), err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "HANDLER `_enginemig_answers` CLOSE")
	// A batch is one INSERT of the pair's copy: its placeholders stay under the protocol's 65,535.
	batch := int64(max(1, min(handlerBatch, 60000/max(1, len(info.Columns)))))
	var read int64
	for verb := "FIRST"; ; verb = "NEXT" {
		n := batch
		if maxRows > 0 {
			n = min(n, maxRows-read)
		}
		if n <= 0 {
			return errMoreRows
		}
		rows, err := conn.QueryContext(ctx, fmt.Sprintf("HANDLER `_enginemig_answers` READ %s LIMIT %d", verb, n))
		if err != nil {
			return fmt.Errorf("read %s: %w", info.QuotedName(), err)
		}
		got, err := scanAll(rows, 0)
		if err != nil {
			return fmt.Errorf("read %s: %w", info.QuotedName(), err)
		}
		if len(got) == 0 {
			return nil
		}
		if err := fn(got); err != nil {
			return err
		}
		read += int64(len(got))
	}
}

// insertRows appends rows to m in their order, in one statement.
func insertRows(ctx context.Context, conn *sql.Conn, m string, rows [][]any) error {
	var b strings.Builder
	args := make([]any, 0, len(rows)*len(rows[0]))
	b.WriteString("INSERT INTO " + m + " VALUES ")
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", len(rows[0])), ",") + ")"
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
		args = append(args, r...)
	}
	if _, err := conn.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("copy rows to %s: %w", m, err)
	}
	return nil
}

// Drop removes both copies and their stopword table (the scratch database stays: it may hold
// others' tables).
func (p *Pair) Drop(ctx context.Context, db *sql.DB) {
	for _, n := range []string{p.MyISAM, p.InnoDB, stopwordTableName(p.MyISAM)} {
		db.ExecContext(ctx, table.DropTableIfExists(p.Schema, n))
	}
}
