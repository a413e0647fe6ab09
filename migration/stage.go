package migration

import (
	"fmt"
	"slices"
	"strings"
)

// Stage is where a migration is: recorded in the state table, shown by progress and status, and
// (through Point) the vocabulary of hooks and gates.
type Stage string

func (s Stage) String() string { return string(s) }

// The stages, in the order a migration passes them; the last four are outcomes.
const (
	StagePreflight Stage = "preflight"
	StageCopy      Stage = "copy"
	StageIndexes   Stage = "indexes"
	StagePostponed Stage = "postponed"
	StageVerify    Stage = "verify"
	StageCutover   Stage = "cutover"
	// StageTriggers: the swap is done; the table's triggers get their own names on it again.
	StageTriggers Stage = "triggers"
	StageDone     Stage = "done"
	StageDryRun   Stage = "dry-run-done"
	StageFailed   Stage = "failed"
	// StageRolledBack marks a migration whose conversion was undone.
	StageRolledBack Stage = "rolled-back"
)

// inProgress are the stages of a migration that has not finished; finding one while nobody holds
// the table's lock means its process died.
func (s Stage) inProgress() bool {
	switch s {
	case StagePreflight, StageCopy, StageIndexes, StageVerify, StagePostponed, StageCutover, StageTriggers:
		return true
	}
	return false
}

// Point is a moment hooks and gates attach to: just before or after a stage, or an outcome.
type Point string

func (p Point) String() string { return string(p) }

// Before and After name the points around a stage ("before-copy", "after-cutover").
func Before(s Stage) Point { return Point("before-" + s) }
func After(s Stage) Point  { return Point("after-" + s) }

// Outcome points.
const (
	PointStart    Point = "start"
	PointSuccess  Point = "success"
	PointFailure  Point = "failure"
	PointRollback Point = "rollback"
)

// HookPoints are the points a hook runs at, in the order a migration passes them.
var HookPoints = []Point{PointStart, Before(StageCopy), After(StageCopy), Before(StageCutover), PointSuccess, PointFailure, PointRollback}

// The gates, as given to --gate.
var (
	GateBeforeCopy    = Before(StageCopy)
	GateBeforeCutover = Before(StageCutover)
	GateAfterCutover  = After(StageCutover)
	gates             = []Point{GateBeforeCopy, GateBeforeCutover, GateAfterCutover}
)

// ParseGates turns "before-copy,after-cutover" or "all" into a set; "" means none.
func ParseGates(s string) (map[Point]bool, error) {
	out := map[Point]bool{}
	for _, g := range strings.Split(s, ",") {
		switch p := Point(strings.TrimSpace(g)); {
		case p == "":
		case p == "all":
			for _, g := range gates {
				out[g] = true
			}
		case slices.Contains(gates, p):
			out[p] = true
		default:
			return nil, fmt.Errorf("unknown gate %q: use before-copy, before-cutover, after-cutover or all", g)
		}
	}
	return out, nil
}
