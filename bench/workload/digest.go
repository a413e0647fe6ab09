package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Statement is one normalised statement shape and what it cost: a row of
// performance_schema.events_statements_summary_by_digest, a difference of two such rows, or the
// statements of one shape in a log file.
type Statement struct {
	Schema string `json:"schema"` // the session's default database when it ran ("" for none)
	Digest string `json:"digest,omitempty"`
	Text   string `json:"text"` // e.g. "SELECT COUNT ( * ) FROM `t` WHERE `a` > ?"
	Count  int64  `json:"count"`
	// Seconds is the statements' total time (SUM_TIMER_WAIT), LockSeconds the part spent waiting
	// for table locks (SUM_LOCK_TIME); both 0 when the source does not time statements.
	Seconds     float64 `json:"seconds"`
	LockSeconds float64 `json:"lock_seconds"`
	// RowsExamined and RowsSent are totals over Count statements; -1 when the source does not say.
	RowsExamined int64 `json:"rows_examined"`
	RowsSent     int64 `json:"rows_sent"`
	// Errors is how many of the Count statements ended with an error (SUM_ERRORS; 0 when the
	// source does not say).
	Errors int64 `json:"errors,omitempty"`
	// Example is one literal statement of this shape, when the source has one (history_long, a log).
	Example string `json:"example,omitempty"`
	// Examples are the distinct literal statements of this shape the source keeps, newest first
	// for the server's history, in the log's order for a log, at most MaxExamples; Example is the
	// first. Statements of one shape can answer differently (a FULLTEXT search whose word is a
	// stopword on one engine only), so the answers check runs each.
	Examples []string `json:"examples,omitempty"`
}

// MaxExamples bounds Examples per statement shape: the answers check runs each on two copies
// of the table, and a shape the application runs with a million different literals would
// otherwise be a million checks.
const MaxExamples = 50

// addExample adds ex to s's distinct examples (up to MaxExamples), setting Example to the first.
func (s *Statement) addExample(ex string) {
	if s.Example == "" {
		s.Example = ex
	}
	if len(s.Examples) >= MaxExamples {
		return
	}
	for _, e := range s.Examples {
		if e == ex {
			return
		}
	}
	s.Examples = append(s.Examples, ex)
}

// MeanRowsExamined is rows examined per statement, -1 when unknown.
func (s Statement) MeanRowsExamined() float64 {
	if s.Count == 0 || s.RowsExamined < 0 {
		return -1
	}
	return float64(s.RowsExamined) / float64(s.Count)
}

// MeanRowsSent is rows sent per statement, -1 when unknown.
func (s Statement) MeanRowsSent() float64 {
	if s.Count == 0 || s.RowsSent < 0 {
		return -1
	}
	return float64(s.RowsSent) / float64(s.Count)
}

// ErrDigestsOff means performance_schema cannot say which statements ran.
var ErrDigestsOff = errors.New("performance_schema statement digests are not available")

const psPerSecond = 1e12

// digestQuery reads the summary; SUM_* columns are unsigned picoseconds, read as DECIMAL so that
// large totals scan into float64 without overflowing int64.
const digestQuery = `SELECT IFNULL(SCHEMA_NAME, ''), IFNULL(DIGEST, ''), DIGEST_TEXT, COUNT_STAR,
	CAST(SUM_TIMER_WAIT AS DECIMAL(30)), CAST(SUM_LOCK_TIME AS DECIMAL(30)), SUM_ROWS_EXAMINED, SUM_ROWS_SENT, SUM_ERRORS
	FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST_TEXT IS NOT NULL`

// ReadDigests reads the statement digest summary: totals since the server started or the
// summary was last truncated. It fails with ErrDigestsOff (wrapped, saying why and what to do)
// when performance_schema is off, the statements_digest consumer is disabled, or the user
// cannot read performance_schema.
func ReadDigests(ctx context.Context, q dbconn.Querier) ([]Statement, error) {
	if err := CheckDigests(ctx, q); err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, digestQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: read events_statements_summary_by_digest: %v", ErrDigestsOff, err)
	}
	defer rows.Close()
	var out []Statement
	for rows.Next() {
		var s Statement
		if err := rows.Scan(&s.Schema, &s.Digest, &s.Text, &s.Count, &s.Seconds, &s.LockSeconds, &s.RowsExamined, &s.RowsSent, &s.Errors); err != nil {
			return nil, fmt.Errorf("read statement digests: %w", err)
		}
		s.Seconds /= psPerSecond
		s.LockSeconds /= psPerSecond
		// A statement sent in a multi-statement batch keeps its ";" in the digest.
		s.Text = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s.Text), ";"))
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read statement digests: %w", err)
	}
	return out, nil
}

// CheckDigests fails with ErrDigestsOff (wrapped, saying why and what to do) when
// performance_schema is off, the statements_digest consumer is disabled, or the user cannot read
// performance_schema.
func CheckDigests(ctx context.Context, q dbconn.Querier) error {
	var enabled string
	if err := q.QueryRowContext(ctx, "SELECT @@performance_schema").Scan(&enabled); err != nil {
		return fmt.Errorf("read @@performance_schema: %w", err)
	}
	if enabled != "1" && !strings.EqualFold(enabled, "ON") {
		return fmt.Errorf("%w: performance_schema is OFF on this server (it needs performance_schema=ON in the server's configuration and a restart)", ErrDigestsOff)
	}
	err := q.QueryRowContext(ctx, "SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'statements_digest'").Scan(&enabled)
	if err != nil {
		return fmt.Errorf("%w: cannot read performance_schema.setup_consumers (%v); grant SELECT ON performance_schema.* to the user", ErrDigestsOff, err)
	}
	if enabled != "YES" {
		return fmt.Errorf("%w: the statements_digest consumer is disabled (UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME = 'statements_digest' turns it on)", ErrDigestsOff)
	}
	return nil
}

// Delta is after minus before for each digest: what ran between two readings. A digest absent
// from before is new (all of it counts); one whose count went down was reset in between (its
// after value counts, the best that is known). Digests that did not run are left out.
func Delta(before, after []Statement) []Statement {
	key := func(s Statement) string { return s.Schema + "\x00" + s.Digest + "\x00" + s.Text }
	prev := make(map[string]Statement, len(before))
	for _, s := range before {
		prev[key(s)] = s
	}
	var out []Statement
	for _, s := range after {
		if p, ok := prev[key(s)]; ok && p.Count <= s.Count {
			s.Count -= p.Count
			s.Seconds -= p.Seconds
			s.LockSeconds -= p.LockSeconds
			s.RowsExamined -= p.RowsExamined
			s.RowsSent -= p.RowsSent
		}
		if s.Count > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Observe reads the digests, waits for window (or until ctx ends), reads them again and returns
// what ran in between. A zero window returns the totals since the counters were last reset.
func Observe(ctx context.Context, q dbconn.Querier, window time.Duration) ([]Statement, error) {
	stmts, _, err := observe(ctx, q, window)
	return stmts, err
}

// observe is Observe that also samples the process list during the window (see sampleRunning).
func observe(ctx context.Context, q dbconn.Querier, window time.Duration) ([]Statement, *runningSamples, error) {
	before, err := ReadDigests(ctx, q)
	if err != nil || window <= 0 {
		return before, nil, err
	}
	running := sampleRunning(ctx, q, window)
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("observe statements: %w", err)
	}
	after, err := ReadDigests(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	return Delta(before, after), running, nil
}

// ExamplesKept reports whether performance_schema keeps literal statements: the consumer
// events_statements_history_long (off by default) and events_statements_current, which feeds it
// (off by default on MariaDB), both on. EnableExamples is the statement that turns them on.
func ExamplesKept(ctx context.Context, q dbconn.Querier) (bool, error) {
	var on int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM performance_schema.setup_consumers
		WHERE NAME IN ('events_statements_current', 'events_statements_history_long') AND ENABLED = 'YES'`).Scan(&on)
	if err != nil {
		return false, fmt.Errorf("read setup_consumers: %w", err)
	}
	return on == 2, nil
}

// EnableExamples turns on the consumers ExamplesKept asks for.
const EnableExamples = "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN ('events_statements_current', 'events_statements_history_long')"

// AddExamples fills Example from events_statements_history_long, where that consumer is on (it is
// off by default; nothing is enabled here). Missing examples are not an error: replay then binds
// every parameter from the table's data alone.
func AddExamples(ctx context.Context, q dbconn.Querier, stmts []Statement) (bool, error) {
	if on, err := ExamplesKept(ctx, q); !on || err != nil {
		return false, err
	}
	rows, err := q.QueryContext(ctx, `SELECT DIGEST, SQL_TEXT FROM performance_schema.events_statements_history_long
		WHERE DIGEST IS NOT NULL AND SQL_TEXT IS NOT NULL ORDER BY EVENT_ID DESC`)
	if err != nil {
		return false, fmt.Errorf("read events_statements_history_long: %w", err)
	}
	defer rows.Close()
	byDigest := map[string][]int{}
	for i := range stmts {
		byDigest[stmts[i].Digest] = append(byDigest[stmts[i].Digest], i)
	}
	for rows.Next() {
		var digest, text string
		if err := rows.Scan(&digest, &text); err != nil {
			return false, fmt.Errorf("read events_statements_history_long: %w", err)
		}
		for _, i := range byDigest[digest] {
			stmts[i].addExample(text)
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read events_statements_history_long: %w", err)
	}
	return true, nil
}
