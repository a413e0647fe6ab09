package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

// TestDemo runs `enginemig demo` end to end on its own sandbox with a small table and short
// benchmark steps, and checks the summary it prints: converted, rolled back losslessly, no
// application error, every acknowledged write present.
func TestDemo(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "bench.html")
	out, code := runCLI(t, "demo", "--rows", "20000", "--gate-threads", "1,8", "--gate-duration", "1s", "--gate-sample-rows", "5000",
		"--threads", "4", "--rate", "800", "--rollback", "--chart", chart, "--output", "json")
	if code != outcome.OK {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var sum struct {
		OK          bool     `json:"ok"`
		EngineAfter string   `json:"engine_after"`
		PlanBlocked []string `json:"plan_blocked_tables"`
		Migration   struct {
			RowsCopied int64 `json:"rows_copied"`
			Cutover    *struct {
				Attempts int `json:"attempts"`
			} `json:"cutover"`
		} `json:"migration"`
		Rollback *struct {
			CaptureChanges int64 `json:"capture_changes"`
		} `json:"rollback"`
		App struct {
			Queries int64 `json:"queries"`
			Errors  int64 `json:"errors"`
		} `json:"application"`
		Check struct {
			Acknowledged int64 `json:"acknowledged_writes"`
			Missing      int64 `json:"missing_rows"`
			Wrong        int64 `json:"wrong_values"`
			RowsChecked  int64 `json:"rows_checked"`
		} `json:"check"`
	}
	i := strings.LastIndex(out, "\n{\n")
	if i < 0 {
		t.Fatalf("no JSON summary\n%s", out)
	}
	if err := json.Unmarshal([]byte(out[i+1:]), &sum); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	switch {
	case !sum.OK:
		t.Errorf("summary not ok\n%s", out)
	case sum.Migration.RowsCopied < 20000 || sum.Migration.Cutover == nil:
		t.Errorf("migration %+v", sum.Migration)
	case sum.Rollback == nil || sum.EngineAfter != "MyISAM":
		t.Errorf("rollback %+v, engine after %q", sum.Rollback, sum.EngineAfter)
	case sum.App.Queries == 0 || sum.App.Errors != 0:
		t.Errorf("application %+v", sum.App)
	case sum.Check.Acknowledged == 0 || sum.Check.Missing != 0 || sum.Check.Wrong != 0 || sum.Check.RowsChecked < 20000:
		t.Errorf("check %+v", sum.Check)
	case len(sum.PlanBlocked) != 1 || sum.PlanBlocked[0] != "trophies":
		t.Errorf("plan blocked %v", sum.PlanBlocked)
	}
	if st, err := os.Stat(chart); err != nil || st.Size() == 0 {
		t.Errorf("chart not written: %v", err)
	}
	for _, want := range []string{"== 3. enginemig plan", "BLOCKER autoinc-not-leading", "Chart: ", "cut-over done", "rolled back in"} {
		if !strings.Contains(out, want) {
			t.Errorf("walkthrough lacks %q", want)
		}
	}
}

func TestDemoUsage(t *testing.T) {
	for _, args := range [][]string{{"demo", "--output", "yaml"}, {"demo", "--rows", "10"}, {"demo", "extra"}} {
		if _, code := runCLI(t, args...); code != outcome.Usage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
