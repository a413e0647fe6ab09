package main

import (
	"testing"
	"time"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/migration"
)

func TestStatusViewDerivesETAAndReplayLag(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := migration.State{Stage: migration.StageCopy, RowsTotal: 1000, RowsCopied: 250, StartedAt: start, UpdatedAt: start.Add(10 * time.Second),
		AppliedFile: "mysql-bin.000003", AppliedPos: 1000}
	v := viewOf(st, binlog.Position{Name: "mysql-bin.000003", Pos: 5096}, start.Add(11*time.Second))
	if v.ETA != "30s" || v.ReplayBehindBytes != 4096 {
		t.Fatalf("eta %q behind %d", v.ETA, v.ReplayBehindBytes)
	}
	done := time.Now()
	st.FinishedAt = &done
	if v := viewOf(st, binlog.Position{Name: "mysql-bin.000004", Pos: 4}, done); v.ETA != "" || v.ReplayBehind != "" {
		t.Fatalf("finished migration shows %+v", v)
	}
}
