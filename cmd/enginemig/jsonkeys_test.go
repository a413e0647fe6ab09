package main

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/cmd/enginemig/demo"
	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/pace/diskspace"
	"github.com/enginemig/enginemig/pace/throttle"
	"github.com/enginemig/enginemig/plan"
	"github.com/enginemig/enginemig/shadow/verify"
)

var snake = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Every key of every JSON document enginemig prints is snake_case.
func TestJSONKeysAreSnakeCase(t *testing.T) {
	cut := &cutover.Result{Position: "mysql-bin.000001:4", Attempts: 1}
	docs := map[string]any{
		"apply":    migration.Result{Cutover: cut, Verify: &verify.Result{}, Gates: []bench.GateResult{{}}, Triggers: []string{"t"}},
		"rollback": rollback.Result{Cutover: cut},
		"status":   control.Status{Throttle: &throttle.Status{}, FinishedAt: &time.Time{}, Disk: &diskspace.Status{FS: []diskspace.FS{{}}}},
		"plan":     plan.Plan{},
		"demo":     demo.Summary{},
		"bench": benchOutput{Report: bench.Report{Coverage: 1, Warnings: []string{"w"},
			Capture: &workload.Capture{Statements: []workload.TableStatement{{Statement: workload.Statement{Digest: "d", Example: "e"}, Others: []workload.TableName{{}}, Reason: "r"}}},
			Results: []bench.Result{{Replay: []bench.ReplayStat{{SQL: "s", NotReplayed: "x"}}}}}, Gate: &bench.GateResult{}},
	}
	for name, doc := range docs {
		b, err := json.Marshal(fill(doc))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		json.Unmarshal(b, &v)
		walkKeys(v, func(k string) {
			if !snake.MatchString(k) {
				t.Errorf("%s: JSON key %q is not snake_case", name, k)
			}
		})
	}
}

// fill returns doc as is: zero values still carry every key that is not omitempty.
func fill(doc any) any { return doc }

func walkKeys(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			f(k)
			walkKeys(e, f)
		}
	case []any:
		for _, e := range x {
			walkKeys(e, f)
		}
	}
}
