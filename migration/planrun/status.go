package planrun

import (
	"context"
	"database/sql"
	"time"

	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/plan"
)

// TableStatus is one table of a plan as `status --plan` shows it.
type TableStatus struct {
	Table    string `json:"table"`
	State    string `json:"state"` // done, running, interrupted, failed, blocked, not-started
	Stage    string `json:"stage,omitempty"`
	Rows     int64  `json:"rows"`
	Estimate string `json:"estimate,omitempty"` // the plan's copy estimate for a table not done yet
}

// Status is where a whole-plan run stands.
type Status struct {
	Tables  []TableStatus `json:"tables"`
	Done    int           `json:"done"`
	Left    int           `json:"left"`
	Running string        `json:"running,omitempty"`
	// ETA: the plan's copy estimates of the tables not started, plus the running table's
	// progress-based rest (an estimate, as good as plan's copy estimate: docs/bench/constants.md).
	ETA string `json:"eta,omitempty"`
}

// StatusOf reads the plan file at path and, from the state table, where each of its tables stands
// at now.
func StatusOf(ctx context.Context, db *sql.DB, store *state.Store, path string, now time.Time) (*Status, error) {
	p, err := plan.ReadFile(path)
	if err != nil {
		return nil, err
	}
	exists, err := store.Exists(ctx)
	if err != nil {
		return nil, err
	}
	out := &Status{}
	var eta time.Duration
	for _, t := range p.Tables {
		ts := TableStatus{Table: t.Schema + "." + t.Table, State: "not-started", Rows: t.Rows}
		var newest *state.State
		if exists {
			states, err := store.List(ctx, t.Schema, t.Table)
			if err != nil {
				return nil, err
			}
			if len(states) > 0 && !states[0].StartedAt.Before(p.GeneratedAt) {
				newest = &states[0]
			}
		}
		remaining := time.Duration(t.Estimate.CopySeconds * float64(time.Second))
		switch {
		case t.Blocked:
			ts.State, remaining = "blocked", 0
		case newest == nil:
		case newest.Stage == state.StageDone:
			ts.State, remaining = "done", 0
		case state.Interrupted(ctx, db, *newest):
			ts.State, ts.Stage = "interrupted", newest.Stage.String()
		case newest.FinishedAt != nil:
			ts.State, ts.Stage = "failed", newest.Stage.String()
		default:
			ts.State, ts.Stage, out.Running = "running", newest.Stage.String(), ts.Table
			if v := state.StatusOf(*newest, "", now); v.CopyETA != "" {
				remaining, _ = time.ParseDuration(v.CopyETA)
			}
		}
		if ts.State == "done" {
			out.Done++
		} else if ts.State != "blocked" {
			out.Left++
			ts.Estimate = remaining.Round(time.Second).String()
		}
		eta += remaining
		out.Tables = append(out.Tables, ts)
	}
	if out.Left > 0 {
		out.ETA = eta.Round(time.Second).String()
	}
	return out, nil
}
