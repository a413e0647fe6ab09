package main

import (
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/state"
)

// Before a stage has a rate (its first report), its ETA is unknown, not "0s", which would read as
// "about to end".
func TestProgressLineSaysETAUnknownBeforeARate(t *testing.T) {
	var out strings.Builder
	d := newProgressDisplay(&out, false, "shop.orders")
	p := migration.Progress{Stage: state.StageCopy, RowsCopied: 71210, RowsTotal: 10007118, StageDone: 71210, StageTotal: 10007118}
	d.update(p)
	if !strings.Contains(out.String(), "ETA unknown (whole run unknown)") {
		t.Errorf("first line: %q", out.String())
	}
	out.Reset()
	d.lastLine = time.Time{}
	p.StageRate, p.StageETA, p.RunETA = 250000, 40*time.Second, 53*time.Second
	d.update(p)
	if !strings.Contains(out.String(), "ETA 40s (whole run 53s)") {
		t.Errorf("line with a rate: %q", out.String())
	}
}
