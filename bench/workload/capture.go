package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// ErrNoStatements means the source shows no statement on the table.
var ErrNoStatements = errors.New("no statement on the table was seen")

// Capture is what the application ran on one table, from one source.
type Capture struct {
	Schema string `json:"schema"`
	Table  string `json:"table"`
	// Source says where the statements came from, for reports.
	Source string `json:"source"`
	// WindowSeconds is the observation window; 0 means totals since the counters were reset (or
	// a whole log file).
	WindowSeconds float64 `json:"window_seconds"`
	// Timed is false when the source does not time statements (a general log): shares are then
	// shares of the statement count.
	Timed      bool             `json:"timed"`
	Statements []TableStatement `json:"statements"`
}

// TableStatement is one statement shape that refers to the captured table.
type TableStatement struct {
	Statement
	// Others are the other tables it refers to (joins, subqueries).
	Others []TableName `json:"other_tables,omitempty"`
	// Share is its share of the table's statement time (of the count when untimed).
	Share float64 `json:"share"`
	// DedicatedClients are the connections that ran the statement in most process-list samples
	// of the observation window (a cron job or dashboard looping a report), DedicatedShare the
	// share of the statement's running time that was theirs; 0 without a window.
	DedicatedClients int     `json:"dedicated_clients,omitempty"`
	DedicatedShare   float64 `json:"dedicated_share,omitempty"`
	// Replay is false when the statement cannot be replayed on a scratch copy; Reason says why.
	Replay bool   `json:"replay"`
	Reason string `json:"reason,omitempty"`
}

// ForTable keeps the statements that refer to schema.table, decides which can be replayed, and
// computes each one's share of the table's statement time. It fails with ErrNoStatements when
// none refers to the table.
func ForTable(stmts []Statement, schema, table, source string, timed bool) (*Capture, error) {
	c := &Capture{Schema: schema, Table: table, Source: source, Timed: timed}
	var total float64
	for _, s := range stmts {
		refs := Tables(s.Text, s.Schema)
		mine := false
		var others []TableName
		for _, r := range refs {
			if r.Schema == schema && strings.EqualFold(r.Name, table) {
				mine = true
			} else {
				others = append(others, r)
			}
		}
		if !mine || s.Count <= 0 || !applicationKinds[Kind(s.Text)] {
			continue
		}
		ts := TableStatement{Statement: s, Others: others}
		ts.Replay, ts.Reason = replayable(s.Text, others)
		c.Statements = append(c.Statements, ts)
		total += c.weightOf(s)
	}
	if len(c.Statements) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoStatements, source)
	}
	for i := range c.Statements {
		if total > 0 {
			c.Statements[i].Share = c.weightOf(c.Statements[i].Statement) / total
		}
	}
	sort.SliceStable(c.Statements, func(i, j int) bool { return c.Statements[i].Share > c.Statements[j].Share })
	return c, nil
}

func (c *Capture) weightOf(s Statement) float64 {
	if c.Timed {
		return s.Seconds
	}
	return float64(s.Count)
}

// applicationKinds are the statements an application runs on its tables; DDL and maintenance
// (CREATE, ALTER, CHECK, SHOW, ...) are not part of its mix.
var applicationKinds = map[string]bool{"SELECT": true, "WITH": true, "INSERT": true, "REPLACE": true, "UPDATE": true,
	"DELETE": true, "LOCK": true, "LOAD": true, "HANDLER": true}

// replayable says whether a statement can run on a scratch copy of the table. Reads may read the
// live other tables (as production does); writes may only touch the table itself.
func replayable(text string, others []TableName) (bool, string) {
	if strings.HasSuffix(text, "...") && !strings.HasSuffix(text, "(...)") {
		return false, "the digest text is truncated (performance_schema_max_digest_length)"
	}
	switch Kind(text) {
	case "SELECT", "WITH":
		if !ReadOnly(text) {
			return false, "SELECT ... INTO or a locking read"
		}
		return true, ""
	case "INSERT", "REPLACE", "UPDATE", "DELETE":
		if len(others) > 0 {
			return false, "writes while reading other tables: replaying it could change or lock them"
		}
		return true, ""
	}
	return false, "not a SELECT, INSERT, REPLACE, UPDATE or DELETE"
}

// Covered is the share of the table's statement time (or count) that the replayable statements
// account for.
func (c *Capture) Covered() float64 {
	var s float64
	for _, st := range c.Statements {
		if st.Replay {
			s += st.Share
		}
	}
	return s
}

// mixFile is the saved form of a capture (--save-mix), so staging can replay production's mix.
type mixFile struct {
	Format  string   `json:"format"`
	Version int      `json:"version"`
	Capture *Capture `json:"capture"`
}

const mixFormat = "enginemig-captured-mix"

// Save writes the capture to path as JSON.
func (c *Capture) Save(path string) error {
	b, err := json.MarshalIndent(mixFile{Format: mixFormat, Version: 1, Capture: c}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("save mix: %w", err)
	}
	return nil
}

// Load reads a capture saved by Save.
func Load(path string) (*Capture, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read mix file: %w", err)
	}
	var f mixFile
	if err := json.Unmarshal(b, &f); err != nil || f.Format != mixFormat || f.Capture == nil {
		return nil, fmt.Errorf("%s is not a mix saved by enginemig bench --save-mix", path)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("%s: mix file version %d is not supported (this enginemig reads version 1)", path, f.Version)
	}
	if len(f.Capture.Statements) == 0 {
		return nil, fmt.Errorf("%s: the saved mix has no statements", path)
	}
	return f.Capture, nil
}

// FromDigests captures the statements on schema.table from performance_schema's statement
// digests: what ran during window, or since the counters were last reset when window is 0.
// Literal examples come from events_statements_history_long where that consumer is on.
func FromDigests(ctx context.Context, q dbconn.Querier, schema, table string, window time.Duration) (*Capture, error) {
	stmts, running, err := observe(ctx, q, window)
	if err != nil {
		return nil, err
	}
	source := "performance_schema statement digests since the counters were last reset"
	if window > 0 {
		source = fmt.Sprintf("performance_schema statement digests over a %s window", window)
	}
	c, err := ForTable(stmts, schema, table, source, true)
	if err != nil {
		return nil, err
	}
	c.WindowSeconds = window.Seconds()
	for i := range c.Statements {
		c.Statements[i].DedicatedClients, c.Statements[i].DedicatedShare = running.dedicated(c.Statements[i].Text)
	}
	var own []Statement
	for _, st := range c.Statements {
		own = append(own, st.Statement)
	}
	if ok, err := AddExamples(ctx, q, own); err == nil && ok {
		for i := range c.Statements {
			c.Statements[i].Example, c.Statements[i].Examples = own[i].Example, own[i].Examples
		}
		c.Source += ", examples from events_statements_history_long"
	}
	return c, nil
}

// FromLog captures the statements on schema.table from a slow query log (long_query_time=0
// logs every statement, with its time and rows examined) or a general query log (statements
// only: shares are then shares of the count).
func FromLog(path, schema, table string) (*Capture, error) {
	stmts, format, err := ReadLogFile(path)
	if err != nil {
		return nil, err
	}
	return ForTable(stmts, schema, table, format+" "+path, format == SlowLog)
}

// HasReads says some replayable statement only reads and examines at most maxRows rows per run
// on average in production (a negative maxRows: any number).
func (c *Capture) HasReads(maxRows float64) bool {
	for _, st := range c.Statements {
		if st.Replay && ReadOnly(st.Text) && (maxRows < 0 || st.MeanRowsExamined() >= 0 && st.MeanRowsExamined() <= maxRows) {
			return true
		}
	}
	return false
}

// Retarget makes a saved capture replay against schema.table: statements that ran with the
// captured database as their default get schema instead (staging databases are often named
// differently). The table name must be the same: statement texts name it.
func (c *Capture) Retarget(schema, table string) error {
	if !strings.EqualFold(c.Table, table) {
		return fmt.Errorf("the saved mix was captured on table %s.%s, not %s: give --table %s, or capture this table's statements", c.Schema, c.Table, table, c.Table)
	}
	if c.Schema == schema {
		return nil
	}
	for i := range c.Statements {
		if c.Statements[i].Schema == c.Schema {
			c.Statements[i].Schema = schema
		}
	}
	c.Schema = schema
	return nil
}
