package main

import (
	"testing"
	"time"

	"github.com/enginemig/enginemig/migration/state"
)

func TestStatusDerivesETAAndReplayLag(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := state.State{Stage: state.StageCopy, RowsTotal: 1000, RowsCopied: 250, StartedAt: start, UpdatedAt: start.Add(10 * time.Second),
		CaptureResume: "mysql-bin.000003:1000"}
	v := state.StatusOf(st, "mysql-bin.000003:5096", start.Add(11*time.Second))
	if v.CopyETA != "30s" || v.CaptureBehindBytes != 4096 || v.Elapsed != 11*time.Second {
		t.Fatalf("eta %q behind %d elapsed %s", v.CopyETA, v.CaptureBehindBytes, v.Elapsed)
	}
	done := time.Now()
	st.FinishedAt = &done
	if v := state.StatusOf(st, "mysql-bin.000004:4", done); v.CopyETA != "" || v.CaptureBehind != "" {
		t.Fatalf("finished migration shows %+v", v)
	}
}
