package plan

import "time"

// FormatVersion is the plan file's format version. Readers refuse other versions: a plan is a
// safety document, and guessing at a format would risk skipping a blocker.
const FormatVersion = 1

// Plan is the result of Inspect and the content of the plan file.
type Plan struct {
	Version     int       `json:"version"`
	GeneratedAt time.Time `json:"generated_at"`
	// Tool is enginemig's version that wrote the plan.
	Tool        string      `json:"tool,omitempty"`
	Server      *ServerInfo `json:"server"`
	Databases   []string    `json:"databases"`
	TestCompile bool        `json:"test_compile"`
	// RankedBy names the figure tables are ordered by (lock wait time, or size as a fallback).
	RankedBy string      `json:"ranked_by"`
	Tables   []TablePlan `json:"tables"`
	// Findings are server-level (and database-level, with schema set).
	Findings []Finding `json:"findings"`
	// Skipped are tables in scope that are not planned, with why (not MyISAM, working tables).
	Skipped []Skipped `json:"skipped,omitempty"`
	Totals  Totals    `json:"totals"`
	Summary Counts    `json:"summary"`
}

// TablePlan is one table: what it is, what was found, what converting it will cost.
type TablePlan struct {
	Rank   int    `json:"rank"`
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Engine string `json:"engine"`
	Rows   int64  `json:"rows"`
	// CopyKey is the index apply will walk ("" when none is usable).
	CopyKey    string     `json:"copy_key"`
	Estimate   Estimate   `json:"estimate"`
	Contention Contention `json:"contention"`
	Findings   []Finding  `json:"findings"`
	// Blocked is true when a finding is a blocker: apply refuses this table.
	Blocked bool `json:"blocked"`
}

// Skipped is a table in scope that plan does not propose to convert.
type Skipped struct {
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Reason string `json:"reason"`
}

// HasBlockers reports whether apply would refuse anything in the plan.
func (p *Plan) HasBlockers() bool { return p.Summary.Blockers > 0 }

// Table finds a table in the plan.
func (p *Plan) Table(schema, name string) (*TablePlan, bool) {
	for i := range p.Tables {
		if p.Tables[i].Schema == schema && p.Tables[i].Table == name {
			return &p.Tables[i], true
		}
	}
	return nil, false
}
