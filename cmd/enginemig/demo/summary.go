package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/rollback"
)

// Summary is what the demo proved; it is also the --output json document.
type Summary struct {
	OK          bool              `json:"ok"`
	Problems    []string          `json:"problems,omitempty"`
	Server      string            `json:"server"`
	Database    string            `json:"database"`
	Table       string            `json:"table"`
	Rows        int64             `json:"rows_seeded"`
	EngineAfter string            `json:"engine_after"`
	PlanBlocked []string          `json:"plan_blocked_tables"`
	Gate        *GateSummary      `json:"before_copy_gate,omitempty"`
	Chart       string            `json:"chart,omitempty"`
	Migration   *migration.Result `json:"migration,omitempty"`
	Rollback    *rollback.Result  `json:"rollback,omitempty"`
	Load        LoadStats         `json:"application"`
	Check       Check             `json:"check"`
	TotalTime   time.Duration     `json:"total_ns"`
	Error       string            `json:"error,omitempty"`
}

// GateSummary is the before-copy sweep's verdict, MyISAM (baseline) against InnoDB.
type GateSummary struct {
	Pass    bool       `json:"pass"`
	Reasons []string   `json:"reasons,omitempty"`
	Steps   []GateStep `json:"steps"`
}

// GateStep is one thread count of the sweep.
type GateStep struct {
	Threads   int     `json:"threads"`
	MyISAMQPS float64 `json:"myisam_qps"`
	InnoDBQPS float64 `json:"innodb_qps"`
	MyISAMP99 float64 `json:"myisam_p99_ms"`
	InnoDBP99 float64 `json:"innodb_p99_ms"`
}

// judge decides OK: the conversion happened, the application saw no error, and every
// acknowledged write is in the final table. The gate's verdict is reported, not judged: it is a
// measurement, and a noisy shared machine must not make the tour fail.
func (s *Summary) judge(runErr error) {
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			s.Error = "interrupted"
		} else {
			s.Error = runErr.Error()
		}
		s.Problems = append(s.Problems, "the demo did not finish: "+s.Error)
	}
	if runErr == nil {
		want := "InnoDB"
		if s.Rollback != nil {
			want = "MyISAM"
		}
		if !strings.EqualFold(s.EngineAfter, want) {
			s.Problems = append(s.Problems, fmt.Sprintf("%s.%s is %s, not %s", s.Database, s.Table, s.EngineAfter, want))
		}
		if s.Load.Errors > 0 {
			s.Problems = append(s.Problems, fmt.Sprintf("the application saw %d error(s), first: %s", s.Load.Errors, s.Load.FirstErr))
		}
		if s.Load.StaleRead > 0 {
			s.Problems = append(s.Problems, fmt.Sprintf("%d read(s) returned an older value than the thread had written", s.Load.StaleRead))
		}
		if !s.Check.OK() {
			s.Problems = append(s.Problems, fmt.Sprintf("final table differs from acknowledged writes: %d missing, %d wrong, %d unexpected rows, %d updates found no row; e.g. %s",
				s.Check.Missing, s.Check.Wrong, s.Check.Unexpected, s.Check.MissedUpdates, strings.Join(s.Check.Examples, "; ")))
		}
		if s.Load.Queries == 0 {
			s.Problems = append(s.Problems, "the application ran no query")
		}
	}
	s.OK = len(s.Problems) == 0
}

// WriteText renders the summary for people.
func (s *Summary) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\n== Summary\n")
	if m := s.Migration; m != nil {
		fmt.Fprintf(w, "  converted %s.%s to InnoDB: %d rows copied, %d changes replayed, migration took %s\n",
			s.Database, s.Table, m.RowsCopied, m.CaptureChanges, m.TotalTime.Round(100*time.Millisecond))
		if c := m.Cutover; c != nil {
			fmt.Fprintf(w, "  cut-over: %d attempt(s), table locked %s; the MyISAM original is kept as %s.%s\n",
				c.Attempts, c.LockHeld.Round(time.Millisecond), s.Database, m.OldTable)
		}
	}
	if r := s.Rollback; r != nil && r.Cutover != nil {
		fmt.Fprintf(w, "  rollback: %d changes made on InnoDB replayed onto the original, swapped back in %d attempt(s) (table locked %s); now %s\n",
			r.CaptureChanges, r.Cutover.Attempts, r.Cutover.LockHeld.Round(time.Millisecond), s.EngineAfter)
	}
	if g := s.Gate; g != nil {
		verdict := "passed"
		if !g.Pass {
			verdict = "FAILED (" + strings.Join(g.Reasons, "; ") + ")"
		}
		fmt.Fprintf(w, "  before-copy gate: %s", verdict)
		if n := len(g.Steps); n > 0 {
			top := g.Steps[n-1]
			fmt.Fprintf(w, "; at %d threads MyISAM %.0f q/s p99 %.1f ms, InnoDB %.0f q/s p99 %.1f ms",
				top.Threads, top.MyISAMQPS, top.MyISAMP99, top.InnoDBQPS, top.InnoDBP99)
		}
		fmt.Fprintf(w, "; chart %s\n", s.Chart)
	}
	l := s.Load
	fmt.Fprintf(w, "  application: %d queries (%.0f/s), %d errors (expected 0), longest stall %s\n",
		l.Queries, l.QPS, l.Errors, l.MaxStall.Round(time.Millisecond))
	c := s.Check
	if c.RowsChecked == 0 {
		// The check runs only at the end; an interrupted or failed demo has nothing to show there.
		fmt.Fprintf(w, "  total time %s\n\nNOT OK:\n", s.TotalTime.Round(time.Second))
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
		return
	}
	fmt.Fprintf(w, "  acknowledged writes: %d; all %d rows of the final table checked against them and the seed:\n", c.Acknowledged, c.RowsChecked)
	fmt.Fprintf(w, "    %d missing, %d with a wrong value, %d unexpected, %d stale reads, %d undecidable (a write failed)\n",
		c.Missing, c.Wrong, c.Unexpected, l.StaleRead, c.Unsure)
	fmt.Fprintf(w, "  total time %s\n", s.TotalTime.Round(time.Second))
	if s.OK {
		what := "the table was converted online"
		if s.Rollback != nil {
			what = "the table was converted online and rolled back"
		}
		fmt.Fprintf(w, "\nOK: %s; every acknowledged write is present and the application saw no error.\n", what)
		return
	}
	fmt.Fprintf(w, "\nNOT OK:\n")
	for _, p := range s.Problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
}
