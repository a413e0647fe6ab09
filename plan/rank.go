package plan

import (
	"context"
	"sort"
	"strings"

	"github.com/enginemig/enginemig/bench/workload"
)

// Ranking sources, as shown in the plan.
const (
	RankByLockWaits = "performance_schema.table_lock_waits_summary_by_table.SUM_TIMER_WAIT"
	RankBySize      = "size (data+index bytes)"
)

// Contention is how much the table waited on table locks since the server started (or since the
// performance_schema summaries were truncated), and the statement counts by kind.
type Contention struct {
	LockWaitSeconds float64 `json:"lock_wait_seconds"`
	LockEvents      int64   `json:"lock_events"`
	// Fetches, Inserts, Updates, Deletes are row operations from table_io_waits_summary_by_table
	// (what bench's "auto" mix is derived from).
	Fetches int64 `json:"fetches"`
	Inserts int64 `json:"inserts"`
	Updates int64 `json:"updates"`
	Deletes int64 `json:"deletes"`
	// Available is false when performance_schema could not tell (off, instrument disabled,
	// no privilege).
	Available bool `json:"available"`
	// Statements are the application's statements on the table that waited longest for locks
	// (statement digests' SUM_LOCK_TIME, the same capture bench --mix auto replays); empty
	// when digests are unavailable.
	Statements []LockStatement `json:"statements,omitempty"`
}

// LockStatement is one statement shape on a table and how long it waited for locks.
type LockStatement struct {
	Text            string  `json:"text"`
	Count           int64   `json:"count"`
	LockWaitSeconds float64 `json:"lock_wait_seconds"`
	Seconds         float64 `json:"seconds"`
	// MeanRowsExamined is rows examined per run (-1 when unknown).
	MeanRowsExamined float64 `json:"mean_rows_examined"`
}

// maxLockStatements is how many statements per table the plan names.
const maxLockStatements = 5

// lockStatements picks the statements on schema.name that waited for locks, longest first.
func lockStatements(digests []Digest, schema, name string) []LockStatement {
	c, err := workload.ForTable(digests, schema, name, "", true)
	if err != nil {
		return nil
	}
	var out []LockStatement
	for _, st := range c.Statements {
		if st.LockSeconds >= minLockWait {
			out = append(out, LockStatement{Text: st.Text, Count: st.Count, LockWaitSeconds: st.LockSeconds,
				Seconds: st.Seconds, MeanRowsExamined: st.MeanRowsExamined()})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LockWaitSeconds > out[j].LockWaitSeconds })
	if len(out) > maxLockStatements {
		out = out[:maxLockStatements]
	}
	return out
}

// picoseconds per second: performance_schema timers are in picoseconds.
const psPerSecond = 1e12

// minLockWait: below this much waiting in total, lock timings are noise (rounding of the
// uncontended cost), not contention worth ranking by.
const minLockWait = 0.001

// loadContention reads lock waits and row operations for the tables of the given schemas.
func loadContention(ctx context.Context, q Querier, schemas []string) map[string]*Contention {
	out := map[string]*Contention{}
	if len(schemas) == 0 {
		return out
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(schemas)), ",") + ")"
	args := make([]any, len(schemas))
	for i, s := range schemas {
		args[i] = s
	}
	get := func(schema, name string) *Contention {
		k := schema + "." + name
		if out[k] == nil {
			out[k] = &Contention{Available: true}
		}
		return out[k]
	}
	// The lock "wait" timer also runs for uncontended acquisitions (about a microsecond each), so
	// a busy table that never waits would still accumulate time. COUNT_STAR x MIN_TIMER_WAIT is
	// that uncontended cost; what is left is time spent waiting for other sessions.
	if rows, err := q.QueryContext(ctx, `SELECT OBJECT_SCHEMA, OBJECT_NAME,
		GREATEST(CAST(SUM_TIMER_WAIT AS DECIMAL(30)) - CAST(COUNT_STAR AS DECIMAL(30)) * MIN_TIMER_WAIT, 0), COUNT_STAR
		FROM performance_schema.table_lock_waits_summary_by_table WHERE OBJECT_TYPE = 'TABLE' AND OBJECT_SCHEMA IN `+in, args...); err == nil {
		for rows.Next() {
			var s, n string
			var wait float64
			var count int64
			if rows.Scan(&s, &n, &wait, &count) == nil {
				c := get(s, n)
				c.LockWaitSeconds, c.LockEvents = wait/psPerSecond, count
			}
		}
		rows.Close()
	}
	if rows, err := q.QueryContext(ctx, `SELECT OBJECT_SCHEMA, OBJECT_NAME, COUNT_FETCH, COUNT_INSERT, COUNT_UPDATE, COUNT_DELETE
		FROM performance_schema.table_io_waits_summary_by_table WHERE OBJECT_TYPE = 'TABLE' AND OBJECT_SCHEMA IN `+in, args...); err == nil {
		for rows.Next() {
			var s, n string
			var f, i, u, d int64
			if rows.Scan(&s, &n, &f, &i, &u, &d) == nil {
				c := get(s, n)
				c.Fetches, c.Inserts, c.Updates, c.Deletes = f, i, u, d
			}
		}
		rows.Close()
	}
	return out
}

// rankTables orders tables by lock wait time (the tables that wait most gain most from row
// locks), falling back to size when performance_schema recorded no waits at all; ties go to the
// bigger table. It sets each table's Rank and returns the figure used.
func rankTables(ts []TablePlan) string {
	by := RankBySize
	for _, t := range ts {
		if t.Contention.Available && t.Contention.LockWaitSeconds >= minLockWait {
			by = RankByLockWaits
			break
		}
	}
	size := func(t TablePlan) int64 { return t.Estimate.DataBytes + t.Estimate.IndexBytes }
	sort.SliceStable(ts, func(i, j int) bool {
		if by == RankByLockWaits && ts[i].Contention.LockWaitSeconds != ts[j].Contention.LockWaitSeconds {
			return ts[i].Contention.LockWaitSeconds > ts[j].Contention.LockWaitSeconds
		}
		if size(ts[i]) != size(ts[j]) {
			return size(ts[i]) > size(ts[j])
		}
		return ts[i].Schema+"."+ts[i].Table < ts[j].Schema+"."+ts[j].Table
	})
	for i := range ts {
		ts[i].Rank = i + 1
	}
	return by
}
