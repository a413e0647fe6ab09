package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	capture "github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/table"
)

// ReplayStat is one captured statement and how it was replayed on one side.
type ReplayStat struct {
	Name string `json:"name"`
	// Text is the statement as production ran it (normalised); SQL what the replay prepared.
	Text string `json:"text"`
	SQL  string `json:"sql,omitempty"`
	// Weight is its weight in the replayed mix (production's statement count, scaled).
	Weight int `json:"weight"`
	// Share is its share of the table's statement time in production (of the count when the
	// source did not time statements).
	Share float64 `json:"share"`
	// ProductionRows and ReplayRows are mean rows examined per statement; -1 when unknown.
	ProductionRows float64 `json:"production_rows_examined"`
	ReplayRows     float64 `json:"replay_rows_examined"`
	// Loops > 0: also (or only, when Weight is 0) replayed by that many background clients, each
	// running it Duty of the time: dedicated clients seen looping it, or Config.ReportRows.
	Loops int     `json:"background_clients,omitempty"`
	Duty  float64 `json:"duty,omitempty"`
	// NotReplayed says why the statement was left out ("" when it was replayed).
	NotReplayed string `json:"not_replayed,omitempty"`
}

// weightScale is the resolution of captured weights: a statement's weight is its share of the
// replayed statements' count in 1/weightScale, at least 1 (a rare write still takes locks).
const weightScale = 10000

// calibrationRuns is how often each replayed statement runs, alone, to measure its rows examined
// on the table under test before the sweep; after calibrationBudget no further run starts (a long
// report is measured by one or two runs).
const (
	calibrationRuns   = 5
	calibrationBudget = 2 * time.Second
)

// capturedOps builds one op per replayable captured statement, bound to the table under test.
// Statements it cannot replay (or, for read-only runs, that write) come back as ReplayStats with
// NotReplayed set, so the report can say what share of the table's time the replay leaves out.
func capturedOps(ctx context.Context, db *sql.DB, info *table.Info, t Target, keys keySource, c *capture.Capture, cfg Config) (ops, bg []op, stats []ReplayStat, err error) {
	readOnly := cfg.ReadOnly
	var total int64
	for _, st := range c.Statements {
		if st.Replay && liveSafe(st.Statement, readOnly) == "" {
			_, _, weighted := replayPlan(st, c, cfg)
			total += weighted
		}
	}
	cols := make([]string, 0, len(info.Columns))
	for _, col := range info.Columns {
		if !col.Generated {
			cols = append(cols, col.Name)
		}
	}
	b := &binder{ctx: ctx, db: db, info: info, keys: keys, columns: map[string]*columnSample{}}
	for i, st := range c.Statements {
		rs := ReplayStat{Name: fmt.Sprintf("stmt%d", i+1), Text: st.Text, Share: st.Share,
			ProductionRows: st.MeanRowsExamined(), ReplayRows: -1}
		switch {
		case !st.Replay:
			rs.NotReplayed = st.Reason
		case liveSafe(st.Statement, readOnly) != "":
			rs.NotReplayed = liveSafe(st.Statement, readOnly)
		default:
			o, err := b.replayOp(st.Statement, c, t, cols)
			if err != nil {
				if ctx.Err() != nil {
					return nil, nil, nil, ctx.Err()
				}
				rs.NotReplayed = err.Error()
				break
			}
			o.name, rs.SQL = rs.Name, o.sql
			k, duty, weighted := replayPlan(st, c, cfg)
			if k > 0 {
				loop := o
				loop.duty = duty
				rs.Loops, rs.Duty = k, duty
				for j := 0; j < k; j++ {
					bg = append(bg, loop)
				}
			}
			if weighted > 0 {
				o.weight = int(max(1, (weighted*weightScale+total/2)/total))
				rs.Weight = o.weight
				ops = append(ops, o)
			}
		}
		stats = append(stats, rs)
	}
	return ops, bg, stats, nil
}

// LoopClients is how many background clients the captured statements need, for sizing the
// connection pool.
func LoopClients(cfg Config) int {
	if cfg.Captured == nil {
		return 0
	}
	n := 0
	for _, st := range cfg.Captured.Statements {
		if st.Replay && liveSafe(st.Statement, cfg.ReadOnly) == "" {
			k, _, _ := replayPlan(st, cfg.Captured, cfg)
			n += k
		}
	}
	return n
}

// minWeightedShare: when dedicated clients account for all but this share of a statement's time,
// the rest is not worth a place in the weighted mix.
const minWeightedShare = 0.1

// replayPlan says how st is replayed: k background clients each running it duty of the time, and
// the count that goes into the threads' weighted mix.
//   - With Config.ReportRows, reads of at least that many rows per run all go to background
//     clients at the concurrency they had in production (their time over the window).
//   - Otherwise a read that dedicated connections looped during the observation window (see
//     workload.TableStatement.DedicatedClients) gets that many background clients at their duty,
//     and only the rest of its time stays weighted: its pace is its clients', not the threads'.
//   - Everything else is weighted by its count.
func replayPlan(st capture.TableStatement, c *capture.Capture, cfg Config) (k int, duty float64, weighted int64) {
	if c.WindowSeconds <= 0 || !capture.ReadOnly(st.Text) || st.Seconds <= 0 {
		return 0, 0, st.Count
	}
	concurrency := st.Seconds / c.WindowSeconds
	if cfg.ReportRows > 0 && st.MeanRowsExamined() >= float64(cfg.ReportRows) {
		k = int(math.Max(1, math.Ceil(concurrency)))
		return k, concurrency / float64(k), 0
	}
	if st.DedicatedClients == 0 {
		return 0, 0, st.Count
	}
	// The digests say how much time the statement ran, the samples how much of it was the
	// dedicated clients': each of them keeps it running duty of the time.
	k = st.DedicatedClients
	duty = math.Min(1, concurrency*st.DedicatedShare/float64(k))
	rest := 1 - st.DedicatedShare
	if rest < minWeightedShare {
		return k, duty, 0
	}
	return k, duty, int64(math.Round(float64(st.Count) * rest))
}

// LiveReadMaxRows bounds the mean rows examined (in production) of the captured reads that
// read-only runs replay: those run on live tables, where a looping report scan would hold MyISAM's
// table lock against the application's writers. Longer reads are replayed on scratch copies only.
const LiveReadMaxRows = 1000

// liveSafe says why a statement must not run in a read-only run ("" when it may, or the run
// is not read-only).
func liveSafe(st capture.Statement, readOnly bool) string {
	switch {
	case !readOnly:
		return ""
	case !capture.ReadOnly(st.Text):
		return "writes, and this run is read-only"
	case st.MeanRowsExamined() < 0:
		return "rows examined unknown, and this run reads a live table: only short reads run there"
	case st.MeanRowsExamined() > LiveReadMaxRows:
		return fmt.Sprintf("examines %.0f rows per run: reads longer than %d rows are replayed on scratch copies only, never on live tables",
			st.MeanRowsExamined(), LiveReadMaxRows)
	}
	return ""
}

// replayOp shapes one statement for the target and binds its parameters from the target's data.
func (b *binder) replayOp(st capture.Statement, c *capture.Capture, t Target, cols []string) (op, error) {
	b.err = nil
	sh, err := capture.ShapeOf(st, capture.ShapeOptions{Columns: cols, ListSize: b.listSize(st),
		Table: capture.TableName{Schema: c.Schema, Name: c.Table}, Target: capture.TableName{Schema: t.Schema, Name: t.Table}})
	if err == nil {
		err = b.err
	}
	if err != nil {
		return op{}, err
	}
	args, err := b.bindParams(st, sh.Params)
	if err != nil {
		return op{}, err
	}
	return op{sql: sh.SQL, rows: capture.ReadOnly(st.Text), args: args}, nil
}

// calibrate runs each replayed statement a few times, alone, and measures its rows examined on
// the table under test from the digest counters, so the report can compare it with production's.
// A statement that cannot be prepared or always fails is dropped with the reason.
//
// The runs go through database/sql without an explicit prepare: enginemig's connections
// interpolate parameters, so the server sees text statements, which MariaDB digests (it does not
// digest executions of prepared statements). Without digests rows examined stay unknown (-1).
func calibrate(ctx context.Context, db *sql.DB, t Target, ops []op, stats []ReplayStat, seed uint64) ([]op, error) {
	byName := map[string]*ReplayStat{}
	for i := range stats {
		byName[stats[i].Name] = &stats[i]
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("calibrate the captured statements: %w", err)
	}
	defer conn.Close()
	r := rand.New(rand.NewPCG(seed, 7))
	var kept []op
	for i := range ops {
		o := &ops[i]
		rs := byName[o.name]
		if reason, err := runCalibration(ctx, conn, db, o, r, rs, t); err != nil {
			return nil, err
		} else if reason != "" {
			rs.NotReplayed, rs.Weight = reason, 0
			continue
		}
		kept = append(kept, *o)
	}
	return kept, nil
}

// runCalibration prepares o once (the sweep will) and runs it calibrationRuns times; it returns
// why the statement cannot be replayed, or "".
func runCalibration(ctx context.Context, conn *sql.Conn, db *sql.DB, o *op, r *rand.Rand, rs *ReplayStat, t Target) (string, error) {
	st, err := conn.PrepareContext(ctx, o.sql)
	if err != nil {
		return "cannot be prepared: " + rootCause(err), ctx.Err()
	}
	st.Close()
	before, digestErr := capture.ReadDigests(ctx, db)
	failed, first, runs := 0, error(nil), 0
	start := time.Now()
	for ; runs < calibrationRuns && (runs == 0 || time.Since(start) < calibrationBudget); runs++ {
		if err := execText(ctx, conn, o, o.args(r, nil)); err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if failed == runs {
		return "fails on the table under test: " + rootCause(first), nil
	}
	if digestErr == nil {
		if after, err := capture.ReadDigests(ctx, db); err == nil {
			rs.ReplayRows = meanRowsOn(capture.Delta(before, after), t)
		}
	}
	return "", nil
}

// execText runs a statement without preparing it, reading its whole result.
func execText(ctx context.Context, conn *sql.Conn, o *op, args []any) error {
	if !o.rows {
		_, err := conn.ExecContext(ctx, o.sql, args...)
		return err
	}
	return readAll(conn.QueryContext(ctx, o.sql, args...))
}

// calibrateLoops calibrates one instance of each background statement and keeps the instances
// of those that can run.
func calibrateLoops(ctx context.Context, db *sql.DB, t Target, bg []op, stats []ReplayStat, seed uint64) ([]op, error) {
	var first []op
	seen := map[string]bool{}
	for _, o := range bg {
		if !seen[o.name] {
			seen[o.name] = true
			first = append(first, o)
		}
	}
	kept, err := calibrate(ctx, db, t, first, stats, seed)
	if err != nil {
		return nil, err
	}
	ok := map[string]bool{}
	for _, o := range kept {
		ok[o.name] = true
	}
	var out []op
	for _, o := range bg {
		if ok[o.name] {
			out = append(out, o)
		}
	}
	for i := range stats {
		if seen[stats[i].Name] && !ok[stats[i].Name] {
			stats[i].Loops, stats[i].Duty = 0, 0
		}
	}
	return out, nil
}

func rootCause(err error) string {
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(err) {
		err = u
	}
	return err.Error()
}

// meanRowsOn is rows examined per statement by the statements on t in ds, -1 when none ran.
func meanRowsOn(ds []capture.Statement, t Target) float64 {
	var n, rows int64
	for _, d := range ds {
		for _, ref := range capture.Tables(d.Text, d.Schema) {
			if ref.Schema == t.Schema && strings.EqualFold(ref.Name, t.Table) {
				n += d.Count
				rows += d.RowsExamined
				break
			}
		}
	}
	if n == 0 {
		return -1
	}
	return float64(rows) / float64(n)
}

// notReplayedSummary lists the distinct reasons statements were left out.
func notReplayedSummary(stats []ReplayStat) string {
	seen := map[string]bool{}
	var out []string
	for _, s := range stats {
		if s.NotReplayed != "" && !seen[s.NotReplayed] {
			seen[s.NotReplayed] = true
			out = append(out, s.NotReplayed)
		}
	}
	return strings.Join(out, "; ")
}
