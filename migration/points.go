package migration

import (
	"fmt"
	"slices"
	"strings"

	"github.com/enginemig/enginemig/migration/state"
)

// Point is a moment hooks and gates attach to: just before or after a stage, or an outcome.
type Point string

func (p Point) String() string { return string(p) }

// Before and After name the points around a stage ("before-copy", "after-cutover").
func Before(s state.Stage) Point { return Point("before-" + s) }
func After(s state.Stage) Point  { return Point("after-" + s) }

// Outcome points.
const (
	PointStart    Point = "start"
	PointSuccess  Point = "success"
	PointFailure  Point = "failure"
	PointRollback Point = "rollback"
)

// HookPoints are the points a hook runs at, in the order a migration passes them.
var HookPoints = []Point{PointStart, Before(state.StageCopy), After(state.StageCopy), Before(state.StageCutover), PointSuccess, PointFailure, PointRollback}

// The gates, as given to --gate.
var (
	GateBeforeCopy    = Before(state.StageCopy)
	GateBeforeCutover = Before(state.StageCutover)
	GateAfterCutover  = After(state.StageCutover)
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
