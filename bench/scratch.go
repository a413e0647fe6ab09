package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// DefaultScratchDB is where sample copies live while a benchmark runs.
const DefaultScratchDB = "_enginemig_bench"

// DefaultSampleRows is the sample size: enough rows that the key range is not one hot page, small
// enough to copy in a second or two.
const DefaultSampleRows = 100000

// sampleChunk bounds each read of the live table while sampling: MyISAM takes a table read lock
// for a SELECT, so short reads keep the application's writers from queueing behind the sample.
const sampleChunk = 2000

// cleanupTimeout bounds dropping scratch tables, which runs even after an interrupt.
const cleanupTimeout = 30 * time.Second

// Scratch is a pair of sample copies of one table, MyISAM and InnoDB, in the scratch database.
type Scratch struct {
	db        *sql.DB
	Schema    string
	MyISAM    string
	InnoDB    string
	Rows      int64
	createdDB bool
	logger    *slog.Logger
}

// NewScratch copies up to rows rows of schema.name (in key order, in short chunks) into a MyISAM
// and an InnoDB table in scratchDB. The live table is only read. Call Drop when done, also on
// error paths: it removes whatever was created.
func NewScratch(ctx context.Context, db *sql.DB, scratchDB, schema, name string, rows int) (*Scratch, error) {
	if scratchDB == "" {
		scratchDB = DefaultScratchDB
	}
	if rows <= 0 {
		rows = DefaultSampleRows
	}
	if scratchDB == schema {
		return nil, fmt.Errorf("the scratch database must not be the table's own database %q", schema)
	}
	info, err := table.Load(ctx, db, schema, name)
	if err != nil {
		return nil, fmt.Errorf("sample %s: %w", dbconn.QualifiedName(schema, name), err)
	}
	key, ok := info.CopyKey()
	if !ok {
		return nil, fmt.Errorf("%s has no primary key or unique NOT NULL key to sample by", info.QuotedName())
	}
	id, err := runID()
	if err != nil {
		return nil, err
	}
	base := name
	if len(base) > 40 {
		base = base[:40]
	}
	s := &Scratch{db: db, logger: dbconn.Logger(nil), Schema: scratchDB, MyISAM: base + "_" + id + "_myisam", InnoDB: base + "_" + id + "_innodb"}
	var exists int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", scratchDB).Scan(&exists); err != nil {
		return nil, fmt.Errorf("look for scratch database: %w", err)
	}
	if exists == 0 {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+dbconn.QuoteIdent(scratchDB)); err != nil {
			return nil, fmt.Errorf("create scratch database %s: %w", scratchDB, err)
		}
		s.createdDB = true
	}
	if err := s.create(ctx, info, key, rows); err != nil {
		if derr := s.Drop(ctx); derr != nil {
			err = fmt.Errorf("%w (and cleaning up: %v)", err, derr)
		}
		return nil, err
	}
	return s, nil
}

func (s *Scratch) create(ctx context.Context, info *table.Info, key table.Index, rows int) error {
	my := dbconn.QualifiedName(s.Schema, s.MyISAM)
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s LIKE %s", my, info.QuotedName())); err != nil {
		return fmt.Errorf("create scratch table %s: %w", my, err)
	}
	if !strings.EqualFold(info.Engine, "MyISAM") {
		if _, err := s.db.ExecContext(ctx, "ALTER TABLE "+my+" ENGINE=MyISAM"); err != nil {
			return fmt.Errorf("make %s MyISAM: %w", my, err)
		}
	}
	in := *info
	in.Schema = s.Schema
	ddl, err := in.Shadow(s.InnoDB, false, false)
	if err != nil {
		return fmt.Errorf("InnoDB scratch DDL: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, ddl.Create); err != nil {
		return fmt.Errorf("create scratch table %s: %w", dbconn.QualifiedName(s.Schema, s.InnoDB), err)
	}
	cols := make([]string, 0, len(info.Columns))
	for _, c := range info.CopyColumns() {
		cols = append(cols, dbconn.QuoteIdent(c.Name))
	}
	colList := strings.Join(cols, ", ")
	if err := s.copySample(ctx, info, key, colList, rows); err != nil {
		return err
	}
	in2 := dbconn.QualifiedName(s.Schema, s.InnoDB)
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s", in2, colList, colList, my)); err != nil {
		return fmt.Errorf("fill %s: %w", in2, err)
	}
	return s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+my).Scan(&s.Rows)
}

// copySample walks the live table's key in short chunks, reading only.
func (s *Scratch) copySample(ctx context.Context, info *table.Info, key table.Index, colList string, rows int) error {
	my := dbconn.QualifiedName(s.Schema, s.MyISAM)
	keyCols := make([]string, len(key.Columns))
	for i, c := range key.Columns {
		keyCols[i] = dbconn.QuoteIdent(c.Name)
	}
	keyList := strings.Join(keyCols, ", ")
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(keyCols)), ", ")
	var last []any
	for copied := 0; copied < rows; {
		n := min(sampleChunk, rows-copied)
		where := ""
		if last != nil {
			where = fmt.Sprintf(" WHERE (%s) > (%s)", keyList, marks)
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s%s ORDER BY %s LIMIT %d", my, colList, colList, info.QuotedName(), where, keyList, n)
		res, err := s.db.ExecContext(ctx, q, last...)
		if err != nil {
			return fmt.Errorf("copy sample of %s: %w", info.QuotedName(), err)
		}
		got, _ := res.RowsAffected()
		copied += int(got)
		if got < int64(n) {
			break
		}
		last = make([]any, len(keyCols))
		ptrs := make([]any, len(keyCols))
		for i := range last {
			ptrs[i] = &last[i]
		}
		if err := s.db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s ORDER BY %s LIMIT 1", keyList, my,
			strings.Join(keyCols, " DESC, ")+" DESC")).Scan(ptrs...); err != nil {
			return fmt.Errorf("copy sample of %s: %w", info.QuotedName(), err)
		}
	}
	return nil
}

// Targets are the two sides to compare; user statements name the original table.
func (s *Scratch) Targets(refSchema, refTable string) []Target {
	return []Target{
		{Label: "MyISAM", Schema: s.Schema, Table: s.MyISAM, RefSchema: refSchema, RefTable: refTable},
		{Label: "InnoDB", Schema: s.Schema, Table: s.InnoDB, RefSchema: refSchema, RefTable: refTable},
	}
}

// Drop removes the scratch tables, and the scratch database when this run created it and nothing
// else is in it. It runs on its own context so that an interrupted run still cleans up.
func (s *Scratch) Drop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var errs []string
	for _, t := range []string{s.MyISAM, s.InnoDB} {
		if _, err := s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+dbconn.QualifiedName(s.Schema, t)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if s.createdDB {
		var left int
		err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", s.Schema).Scan(&left)
		if err == nil && left == 0 {
			_, err = s.db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+dbconn.QuoteIdent(s.Schema))
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("drop scratch tables in %s: %s", s.Schema, strings.Join(errs, "; "))
	}
	return nil
}

// runID keeps concurrent benchmarks of the same table from sharing scratch tables.
func runID() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("scratch table name: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// newScratchLogged is NewScratch telling logger (Debug) what it made and how long it took.
func newScratchLogged(ctx context.Context, db *sql.DB, scratchDB, schema, name string, rows int, logger *slog.Logger) (*Scratch, error) {
	start := time.Now()
	s, err := NewScratch(ctx, db, scratchDB, schema, name, rows)
	if err != nil {
		return nil, err
	}
	s.logger = logger
	logger.Debug("bench: scratch copies ready", slog.String("table", schema+"."+name), slog.String("scratch_database", s.Schema),
		slog.String("myisam", s.MyISAM), slog.String("innodb", s.InnoDB), slog.Int64("rows", s.Rows),
		slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	return s, nil
}

// dropLogged drops the copies when a benchmark ends. A failure becomes *errp when the benchmark
// itself succeeded; otherwise the benchmark's error wins, and the leftover tables are a warning
// rather than lost.
func (s *Scratch) dropLogged(ctx context.Context, errp *error) {
	derr := s.Drop(ctx)
	switch {
	case derr == nil:
		s.logger.Debug("bench: scratch copies dropped", slog.String("scratch_database", s.Schema))
	case *errp == nil:
		*errp = derr
	default:
		s.logger.Warn("bench: scratch copies left behind; drop them by hand", slog.String("scratch_database", s.Schema),
			slog.String("myisam", s.MyISAM), slog.String("innodb", s.InnoDB), slog.Any("error", derr))
	}
}
