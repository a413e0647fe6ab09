package migration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/shadow"
	"github.com/enginemig/enginemig/table"
)

// DefaultStateSchema holds enginemig's own bookkeeping, apart from application tables.
const DefaultStateSchema = "_enginemig"

// State is one migration's row in the state table.
type State struct {
	ID            int64  `json:"id"`
	Schema        string `json:"schema"`
	Table         string `json:"table"`
	Stage         Stage  `json:"stage"`
	DryRun        bool   `json:"dry_run"`
	StartFile     string `json:"binlog_start_file"`
	StartPos      uint32 `json:"binlog_start_pos"`
	CutoverFile   string `json:"binlog_cutover_file,omitempty"`
	CutoverPos    uint32 `json:"binlog_cutover_pos,omitempty"`
	Watermark     string `json:"copy_watermark,omitempty"` // the last copied key, see encodeKey
	AppliedFile   string `json:"binlog_applied_file,omitempty"`
	AppliedPos    uint32 `json:"binlog_applied_pos,omitempty"` // every change before this is in the shadow
	RowsTotal     int64  `json:"rows_total"`
	RowsCopied    int64  `json:"rows_copied"`
	EventsApplied int64  `json:"events_applied"`
	// Triggers are the table's triggers when the migration started, carried across the swap.
	Triggers []table.Trigger `json:"triggers,omitempty"`
	// Capture is how changes were captured (shadow.Binlog or shadow.Triggers): a migration with
	// trigger capture records no binlog positions, and its rollback captures with triggers too.
	Capture    shadow.Mode `json:"capture"`
	Error      string      `json:"error,omitempty"`
	StartedAt  time.Time   `json:"started_at"`
	UpdatedAt  time.Time   `json:"updated_at"`
	FinishedAt *time.Time  `json:"finished_at,omitempty"`
}

const stateDDL = `CREATE TABLE IF NOT EXISTS %s (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  schema_name VARCHAR(64) NOT NULL,
  table_name VARCHAR(64) NOT NULL,
  stage VARCHAR(32) NOT NULL,
  dry_run TINYINT(1) NOT NULL DEFAULT 0,
  binlog_start_file VARCHAR(255) NOT NULL DEFAULT '',
  binlog_start_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
  binlog_cutover_file VARCHAR(255) NOT NULL DEFAULT '',
  binlog_cutover_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
  copy_watermark TEXT NULL,
  binlog_applied_file VARCHAR(255) NOT NULL DEFAULT '',
  binlog_applied_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
  rows_total BIGINT NOT NULL DEFAULT 0,
  rows_copied BIGINT NOT NULL DEFAULT 0,
  events_applied BIGINT NOT NULL DEFAULT 0,
  triggers LONGTEXT NULL,
  capture VARCHAR(16) NOT NULL DEFAULT 'binlog',
  error TEXT NULL,
  started_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  finished_at DATETIME(3) NULL,
  KEY by_table (schema_name, table_name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// Store reads and writes the state table.
type Store struct {
	db     *sql.DB
	schema string
}

// NewStore uses schema (DefaultStateSchema when empty) for the state table.
func NewStore(db *sql.DB, schema string) *Store {
	if schema == "" {
		schema = DefaultStateSchema
	}
	return &Store{db: db, schema: schema}
}

func (s *Store) table() string { return dbconn.QualifiedName(s.schema, "migrations") }

// Ensure creates the state schema and table if missing (InnoDB, so a record survives a crash).
func (s *Store) Ensure(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+dbconn.QuoteIdent(s.schema)); err != nil {
		return fmt.Errorf("create state schema %s (needs CREATE on it, or pass --state-schema): %w", s.schema, err)
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(stateDDL, s.table())); err != nil {
		return fmt.Errorf("create state table %s: %w", s.table(), err)
	}
	// State tables of earlier versions lack the later columns.
	for _, col := range []struct{ name, def string }{
		{"triggers", "triggers LONGTEXT NULL AFTER events_applied"},
		{"capture", "capture VARCHAR(16) NOT NULL DEFAULT 'binlog' AFTER triggers"},
	} {
		has, err := s.hasColumn(ctx, col.name)
		if err != nil {
			return err
		}
		if !has {
			if _, err := s.db.ExecContext(ctx, "ALTER TABLE "+s.table()+" ADD COLUMN "+col.def); err != nil {
				return fmt.Errorf("upgrade state table %s: %w", s.table(), err)
			}
		}
	}
	return nil
}

// hasColumn reports whether the state table has a column added in a later version: reading an
// older table must not fail, and must not change it either.
func (s *Store) hasColumn(ctx context.Context, name string) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'migrations' AND COLUMN_NAME = ?",
		s.schema, name).Scan(&n); err != nil {
		return false, fmt.Errorf("look up the state table %s: %w", s.table(), err)
	}
	return n > 0, nil
}

// Exists reports whether the state table has been created (by a first apply).
func (s *Store) Exists(ctx context.Context) (bool, error) {
	return s.any(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'migrations'")
}

// any runs a COUNT(*) about the state table (its schema the one argument) and says if it found any.
func (s *Store) any(ctx context.Context, query string) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, query, s.schema).Scan(&n); err != nil {
		return false, fmt.Errorf("look up the state table %s: %w", s.table(), err)
	}
	return n > 0, nil
}

// Begin records a new migration and returns its id.
func (s *Store) Begin(ctx context.Context, st *State) error {
	now := time.Now().UTC()
	st.StartedAt, st.UpdatedAt = now, now
	res, err := s.db.ExecContext(ctx, "INSERT INTO "+s.table()+` (schema_name, table_name, stage, dry_run, binlog_start_file,
		binlog_start_pos, rows_total, triggers, capture, started_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		st.Schema, st.Table, st.Stage, st.DryRun, st.StartFile, st.StartPos, st.RowsTotal, encodeTriggers(st.Triggers), st.captureMode(), now, now)
	if err != nil {
		return fmt.Errorf("record migration: %w", err)
	}
	st.ID, err = res.LastInsertId()
	return err
}

// Save writes the mutable fields of st.
func (s *Store) Save(ctx context.Context, st *State) error {
	st.UpdatedAt = time.Now().UTC()
	_, err := s.db.ExecContext(ctx, "UPDATE "+s.table()+` SET stage=?, binlog_start_file=?, binlog_start_pos=?,
		binlog_cutover_file=?, binlog_cutover_pos=?, copy_watermark=?, binlog_applied_file=?, binlog_applied_pos=?, rows_total=?, rows_copied=?, events_applied=?,
		error=?, updated_at=?, finished_at=? WHERE id=?`,
		st.Stage, st.StartFile, st.StartPos, st.CutoverFile, st.CutoverPos, nullIfEmpty(st.Watermark), st.AppliedFile, st.AppliedPos, st.RowsTotal,
		st.RowsCopied, st.EventsApplied, nullIfEmpty(st.Error), st.UpdatedAt, st.FinishedAt, st.ID)
	if err != nil {
		return fmt.Errorf("update migration state: %w", err)
	}
	return nil
}

// List returns recorded migrations, newest first, optionally for one table.
func (s *Store) List(ctx context.Context, schema, table string) ([]State, error) {
	triggersCol, captureCol := "COALESCE(triggers,'')", "capture"
	if has, err := s.hasColumn(ctx, "triggers"); err != nil {
		return nil, err
	} else if !has {
		triggersCol = "''"
	}
	if has, err := s.hasColumn(ctx, "capture"); err != nil {
		return nil, err
	} else if !has {
		captureCol = "'binlog'"
	}
	q := "SELECT id, schema_name, table_name, stage, dry_run, binlog_start_file, binlog_start_pos, binlog_cutover_file, " +
		"binlog_cutover_pos, COALESCE(copy_watermark,''), binlog_applied_file, binlog_applied_pos, rows_total, rows_copied, events_applied, COALESCE(error,''), " +
		triggersCol + ", " + captureCol + ", " +
		"started_at, updated_at, finished_at FROM " + s.table()
	var args []any
	if schema != "" {
		q += " WHERE schema_name = ?"
		args = append(args, schema)
		if table != "" {
			q += " AND table_name = ?"
			args = append(args, table)
		}
	}
	rows, err := s.db.QueryContext(ctx, q+" ORDER BY id DESC", args...)
	if err != nil {
		return nil, fmt.Errorf("read migration state: %w", err)
	}
	defer rows.Close()
	var out []State
	for rows.Next() {
		var st State
		var started, updated []byte
		var finished sql.NullString
		var triggers string
		if err := rows.Scan(&st.ID, &st.Schema, &st.Table, &st.Stage, &st.DryRun, &st.StartFile, &st.StartPos, &st.CutoverFile,
			&st.CutoverPos, &st.Watermark, &st.AppliedFile, &st.AppliedPos, &st.RowsTotal, &st.RowsCopied, &st.EventsApplied, &st.Error, &triggers, &st.Capture, &started, &updated, &finished); err != nil {
			return nil, err
		}
		if triggers != "" {
			if err := json.Unmarshal([]byte(triggers), &st.Triggers); err != nil {
				return nil, fmt.Errorf("migration #%d: triggers: %w", st.ID, err)
			}
		}
		st.StartedAt, _ = time.Parse("2006-01-02 15:04:05.000", string(started))
		st.UpdatedAt, _ = time.Parse("2006-01-02 15:04:05.000", string(updated))
		if finished.Valid {
			t, _ := time.Parse("2006-01-02 15:04:05.000", finished.String)
			st.FinishedAt = &t
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// captureMode is the capture the record stands for (binlog for records of earlier versions).
func (st State) captureMode() shadow.Mode {
	if st.Capture == "" {
		return shadow.Binlog
	}
	return st.Capture
}

// encodeTriggers stores trigger definitions as JSON (bodies base64, byte for byte); nil for none.
func encodeTriggers(trs []table.Trigger) any {
	if len(trs) == 0 {
		return nil
	}
	b, _ := json.Marshal(trs)
	return string(b)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// keyPart is one key value in the state table: integers and decimals as text, everything else
// as base64 bytes, so binary keys survive JSON unchanged.
type keyPart struct {
	Text  string `json:"n,omitempty"`
	Bytes []byte `json:"b,omitempty"`
	IsNum bool   `json:"i,omitempty"`
}

// encodeKey stores a key as JSON text for the state table ("" for none).
func encodeKey(key []any) string {
	if key == nil {
		return ""
	}
	parts := make([]keyPart, len(key))
	for i, v := range key {
		switch x := v.(type) {
		case []byte:
			parts[i] = keyPart{Bytes: x}
		case string:
			parts[i] = keyPart{Bytes: []byte(x)}
		default:
			parts[i] = keyPart{Text: fmt.Sprint(x), IsNum: true}
		}
	}
	b, _ := json.Marshal(parts)
	return string(b)
}

// decodeKey reverses encodeKey.
func decodeKey(s string) ([]any, error) {
	if s == "" {
		return nil, nil
	}
	var parts []keyPart
	if err := json.Unmarshal([]byte(s), &parts); err != nil {
		return nil, fmt.Errorf("copy watermark %q: %w", s, err)
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		if p.IsNum {
			// Integers as integers: a string compared with an integer column is compared as a
			// double, which is inexact above 2^53.
			if n, err := strconv.ParseInt(p.Text, 10, 64); err == nil {
				out[i] = n
			} else if u, err := strconv.ParseUint(p.Text, 10, 64); err == nil {
				out[i] = u
			} else {
				out[i] = p.Text
			}
		} else {
			out[i] = p.Bytes
			if p.Bytes == nil {
				out[i] = []byte{}
			}
		}
	}
	return out, nil
}
