// Package state records migrations: the state table (its schema and upgrades, one row per
// migration with its stage and progress), the advisory lock that says whether a recorded run is
// still alive, and the status derived from a row.
package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/shadow"
)

// DefaultStateSchema holds enginemig's own bookkeeping, apart from application tables.
const DefaultStateSchema = "_enginemig"

// State is one migration's row in the state table.
type State struct {
	ID     int64  `json:"id"`
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Stage  Stage  `json:"stage"`
	DryRun bool   `json:"dry_run"`
	// The capture's positions, serialised by the capture (shadow.Position): where it started,
	// where a resumed run restarts it (every change before it is in the shadow), and the one read
	// under the cut-over's lock, where a rollback's capture starts.
	CaptureStart   shadow.Position `json:"capture_start,omitempty"`
	CaptureResume  shadow.Position `json:"capture_resume,omitempty"`
	CaptureCutover shadow.Position `json:"capture_cutover,omitempty"`
	Watermark      string          `json:"copy_watermark,omitempty"` // the last copied key, see EncodeKey
	RowsTotal      int64           `json:"rows_total"`
	RowsCopied     int64           `json:"rows_copied"`
	CaptureChanges int64           `json:"capture_changes"`
	// Triggers are the table's triggers when the migration started, carried across the swap.
	Triggers []table.Trigger `json:"triggers,omitempty"`
	// Capture is how changes were captured: a resumed run and the rollback capture the same way,
	// from the positions above in that capture's spelling.
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
  capture_start VARCHAR(255) NOT NULL DEFAULT '',
  capture_cutover VARCHAR(255) NOT NULL DEFAULT '',
  copy_watermark TEXT NULL,
  capture_resume VARCHAR(255) NOT NULL DEFAULT '',
  rows_total BIGINT NOT NULL DEFAULT 0,
  rows_copied BIGINT NOT NULL DEFAULT 0,
  capture_changes BIGINT NOT NULL DEFAULT 0,
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
	db       *sql.DB
	schema   string
	mu       sync.Mutex
	upgraded bool
}

// NewStore uses schema (DefaultStateSchema when empty) for the state table.
func NewStore(db *sql.DB, schema string) *Store {
	if schema == "" {
		schema = DefaultStateSchema
	}
	return &Store{db: db, schema: schema}
}

// Name is the state table, qualified.
func (s *Store) Name() string { return dbconn.QualifiedName(s.schema, s.table()) }

// table is the state table's name in its schema (table.OwnTableName).
func (s *Store) table() string { return table.OwnTableName(s.schema, "migrations") }

// Resolve is the state schema of a run on appSchema: schema when another than the default was
// asked for (--state-schema); by default DefaultStateSchema where the account sees it or, with
// create (apply), may create it; else appSchema itself, the one database of a hosted account
// (where the state table is _enginemig_migrations). The commands that only read (rollback,
// status, cleanup) look where apply would have put it.
func Resolve(ctx context.Context, db *sql.DB, schema, appSchema string, create bool) string {
	if schema != "" && schema != DefaultStateSchema {
		return schema
	}
	var n int
	if db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", DefaultStateSchema).Scan(&n) == nil && n > 0 {
		return DefaultStateSchema
	}
	if create {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+dbconn.QuoteIdent(DefaultStateSchema)); err == nil {
			return DefaultStateSchema
		}
	}
	if appSchema == "" {
		return DefaultStateSchema
	}
	return appSchema
}

// Ensure creates the state schema and table if missing (InnoDB, so a record survives a crash),
// and upgrades a table of an earlier version.
func (s *Store) Ensure(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+dbconn.QuoteIdent(s.schema)); err != nil {
		return fmt.Errorf("create state schema %s (needs CREATE on it, or pass --state-schema): %w", s.schema, err)
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(stateDDL, s.Name())); err != nil {
		return fmt.Errorf("create state table %s: %w", s.Name(), err)
	}
	s.mu.Lock()
	s.upgraded = false // look again: Ensure is where a run makes sure
	s.mu.Unlock()
	return s.upgrade(ctx)
}

// Columns names the state table's columns: reading an older table must not fail, and must not
// change it either.
func (s *Store) Columns(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", s.schema, s.table())
	if err != nil {
		return nil, fmt.Errorf("look up the state table %s: %w", s.Name(), err)
	}
	defer rows.Close()
	has := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		has[strings.ToLower(n)] = true
	}
	return has, rows.Err()
}

// Exists reports whether the state table has been created (by a first apply).
func (s *Store) Exists(ctx context.Context) (bool, error) {
	return s.any(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?")
}

// any runs a COUNT(*) about the state table (its schema and name the arguments) and says if it
// found any.
func (s *Store) any(ctx context.Context, query string) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, query, s.schema, s.table()).Scan(&n); err != nil {
		return false, fmt.Errorf("look up the state table %s: %w", s.Name(), err)
	}
	return n > 0, nil
}

// Begin records a new migration and returns its id.
func (s *Store) Begin(ctx context.Context, st *State) error {
	now := time.Now().UTC()
	st.StartedAt, st.UpdatedAt = now, now
	if err := s.upgrade(ctx); err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, "INSERT INTO "+s.Name()+` (schema_name, table_name, stage, dry_run, capture_start,
		rows_total, triggers, capture, started_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
		st.Schema, st.Table, st.Stage, st.DryRun, st.CaptureStart, st.RowsTotal, encodeTriggers(st.Triggers), st.CaptureMode(), now, now)
	if err != nil {
		return fmt.Errorf("record migration: %w", err)
	}
	st.ID, err = res.LastInsertId()
	return err
}

// Save writes the mutable fields of st.
func (s *Store) Save(ctx context.Context, st *State) error {
	if err := s.upgrade(ctx); err != nil {
		return err
	}
	st.UpdatedAt = time.Now().UTC()
	_, err := s.db.ExecContext(ctx, "UPDATE "+s.Name()+` SET stage=?, capture_start=?, capture_cutover=?, copy_watermark=?,
		capture_resume=?, rows_total=?, rows_copied=?, capture_changes=?, error=?, updated_at=?, finished_at=? WHERE id=?`,
		st.Stage, st.CaptureStart, st.CaptureCutover, nullIfEmpty(st.Watermark), st.CaptureResume, st.RowsTotal,
		st.RowsCopied, st.CaptureChanges, nullIfEmpty(st.Error), st.UpdatedAt, st.FinishedAt, st.ID)
	if err != nil {
		return fmt.Errorf("update migration state: %w", err)
	}
	return nil
}

// List returns recorded migrations, newest first, optionally for one table. It reads a state
// table of an earlier version as it is, without changing it (see upgrade).
func (s *Store) List(ctx context.Context, schema, table string) ([]State, error) {
	has, err := s.Columns(ctx)
	if err != nil {
		return nil, err
	}
	// Each column as this version names it, or as an earlier version's table holds it.
	col := func(name, earlier string) string {
		if has[name] {
			return name
		}
		return earlier
	}
	triggers := "''"
	if has["triggers"] {
		triggers = "COALESCE(triggers,'')"
	}
	q := "SELECT id, schema_name, table_name, stage, dry_run, " + col("capture_start", legacyPos("binlog_start")) + ", " +
		col("capture_cutover", legacyPos("binlog_cutover")) + ", COALESCE(copy_watermark,''), " + col("capture_resume", legacyPos("binlog_applied")) +
		", rows_total, rows_copied, " + col("capture_changes", "events_applied") + ", COALESCE(error,''), " +
		triggers + ", " + col("capture", "'binlog'") + ", started_at, updated_at, finished_at FROM " + s.Name()
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
		if err := rows.Scan(&st.ID, &st.Schema, &st.Table, &st.Stage, &st.DryRun, &st.CaptureStart, &st.CaptureCutover, &st.Watermark,
			&st.CaptureResume, &st.RowsTotal, &st.RowsCopied, &st.CaptureChanges, &st.Error, &triggers, &st.Capture, &started, &updated, &finished); err != nil {
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

// Unfinished returns the newest migration record of the table if it was left in progress.
func (store *Store) Unfinished(ctx context.Context, schema, name string) (*State, error) {
	if exists, err := store.Exists(ctx); err != nil || !exists {
		return nil, err
	}
	states, err := store.List(ctx, schema, name)
	if err != nil || len(states) == 0 {
		return nil, err
	}
	st := states[0]
	if !st.Stage.InProgress() || st.FinishedAt != nil {
		return nil, nil
	}
	return &st, nil
}

// CaptureMode is the capture the record stands for (see shadow.ModeOf for earlier versions').
func (st State) CaptureMode() shadow.Mode { return shadow.ModeOf(string(st.Capture)) }

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
	Null  bool   `json:"z,omitempty"` // a NULL part (a keyless table's chunk key may have one)
}

// EncodeKey stores a key as JSON text for the state table ("" for none).
func EncodeKey(key []any) string {
	if key == nil {
		return ""
	}
	parts := make([]keyPart, len(key))
	for i, v := range key {
		switch x := v.(type) {
		case nil:
			parts[i] = keyPart{Null: true}
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

// DecodeKey reverses EncodeKey.
func DecodeKey(s string) ([]any, error) {
	if s == "" {
		return nil, nil
	}
	var parts []keyPart
	if err := json.Unmarshal([]byte(s), &parts); err != nil {
		return nil, fmt.Errorf("copy watermark %q: %w", s, err)
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		if p.Null {
			continue
		}
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
