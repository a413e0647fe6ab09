package migration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/faults"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
	"github.com/enginemig/enginemig/migration/state"
)

// A migration that dies (no cleanup, connections dropped) at a stage before the cut-over is
// resumed by the next run of the same migration, with writers running throughout, and the result
// matches the reference table exactly.
func TestResumeAfterCrash(t *testing.T) {
	resumeAfterCrash(t, srv, crashCases)
}

// The same with trigger capture, on a server without a binlog: its triggers keep noting changes
// while nothing runs.
func TestTriggerCaptureResumeAfterCrash(t *testing.T) {
	t.Parallel() // a server of its own (docs/testing.md, "Parallel tests")
	resumeAfterCrash(t, sandboxtest.ForTest(t, sandbox.Options{BinlogFormat: "OFF"}), []crashCase{crashCases[0], crashCases[3]})
}

type crashCase struct {
	name      string
	afterRows int64
	stage     state.Stage
	parallel  bool // two chunks in flight, every other one overtaken
}

// resumeRows is the table's size: about fifty 2 ms chunks, with writes landing all through them
// (12000 until 2026-12-05; halved for CI's time, docs/testing.md).
const resumeRows = 6000

var crashCases = []crashCase{
	{"during copy", resumeRows / 2, "", false},
	{"at index build", 0, state.StageIndexes, false},
	{"during verify", 0, state.StageVerify, false},
	{"at cut-over", 0, state.StageCutover, false},
	{"during a parallel copy", resumeRows / 2, "", true},
}

func resumeAfterCrash(t *testing.T, srv *sandbox.Server, cases []crashCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema, _ := sandboxtest.FreshDatabase(t, srv)
			db := openControl(t, srv)
			ws := seedAllTypes(t, db, schema, resumeRows, 3, 11)
			stop := runWriters(ws, appPause)
			logs := &logLines{each: func(line string) {
				if strings.Contains(line, "differs") || strings.Contains(line, "resuming") {
					t.Log(line)
				}
			}}
			opts := testOptions(srv, schema, "t")
			hooks := faults.Hooks{CopyChunkTime: 2 * time.Millisecond} // many small copy chunks under the writers; verification at apply's chunk time
			opts.ProgressEvery, hooks.SaveEvery = 50*time.Millisecond, 50*time.Millisecond
			hooks.CrashAfterRows, hooks.CrashAtStage = c.afterRows, string(c.stage)
			if c.parallel {
				opts.CopyWorkers, hooks.CopyAlwaysParallel, hooks.OvertakeDelay = 2, true, 30*time.Millisecond
			}
			opts.Logger = logs.logger()
			_, err := Run(withHooks(context.Background(), hooks), db, opts)
			if !errors.Is(err, errSimulatedCrash) {
				stop()
				t.Fatalf("first run: want simulated crash, got %v", err)
			}
			if !tableExists(t, db, schema, "_t_new") {
				t.Fatal("the crashed run's shadow is gone")
			}
			time.Sleep(2 * time.Second) // writes while nothing runs: only the binlog or the triggers keep them
			hooks.CrashAfterRows, hooks.CrashAtStage = 0, ""
			res, err := Run(withHooks(context.Background(), hooks), db, opts)
			time.Sleep(200 * time.Millisecond)
			stop()
			if err != nil {
				t.Fatalf("resumed run: %v", err)
			}
			if !strings.Contains(logs.String(), "resuming migration") {
				t.Fatalf("second run did not resume; log: %v", logs.String())
			}
			if c.afterRows > 0 && res.RowsCopied >= resumeRows {
				t.Fatalf("resumed copy started over: copied %d rows again", res.RowsCopied)
			}
			// Capture kept every change while nothing ran: verification repairing a chunk means
			// the resumed run lost or resurrected rows, which the final comparison cannot see. A
			// run that died at the cut-over had copied and verified everything: its resume goes
			// straight to the swap, and the comparison with ref below is the proof.
			switch {
			case c.stage == state.StageCutover && (res.Verify != nil || res.RowsCopied != 0):
				t.Errorf("resumed at the cut-over, but copied %d rows and verified (%+v)", res.RowsCopied, res.Verify)
			case c.stage != state.StageCutover && (res.Verify == nil || res.Verify.Repaired > 0):
				t.Errorf("verify had to repair the shadow after the resume (%+v)", res.Verify)
			}
			for _, w := range ws {
				if len(w.failures) > 0 {
					t.Errorf("writer %d: %s", w.id, w.failures[0])
				}
			}
			if engineOf(t, db, schema, "t") != "InnoDB" {
				t.Fatal("not converted")
			}
			if diff := sameRows(t, db, schema, "t", "ref", allTypesColumns, "id"); diff != "" {
				ids := strings.Fields(diff[strings.LastIndex(diff, "[")+1 : strings.LastIndex(diff, "]")])
				t.Logf("log: %s", logs.String())
				// Every differing row in the three tables: a write that landed in the kept original
				// after the cut-over's sync shows there and in ref, not in t.
				var dump []string
				for _, id := range ids[:min(len(ids), 10)] {
					dump = append(dump, dumpRow(t, db, schema, "id", id, allTypesColumns, "t", "ref", "_t_old"))
				}
				t.Fatalf("%s\n%s", diff, strings.Join(dump, "\n"))
			}
			if diff := sameRows(t, db, schema, "ref", "t", allTypesColumns, "id"); diff != "" {
				t.Fatal(diff)
			}
			t.Logf("resumed: copied %d rows on the second run, verify %+v", res.RowsCopied, res.Verify)
		})
	}
}
