package main

import (
	"testing"
	"time"
)

func TestWriteStallsNameTheirStage(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	marks := []stageMark{{t0, "copy"}, {t0.Add(10 * time.Second), "verify"}}
	gaps := []writeGap{
		{90 * time.Millisecond, t0.Add(-time.Second)},
		{120 * time.Millisecond, t0.Add(5 * time.Second)},
		{157 * time.Millisecond, t0.Add(10 * time.Second)},
	}
	got := formatGaps(gaps, marks)
	want := "90ms ended 12:59:59.000, 120ms ended 13:00:05.000 (copy), 157ms ended 13:00:10.000 (verify)"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := formatGaps(gaps[:1], nil); got != "90ms ended 12:59:59.000" {
		t.Fatalf("without stages: %q", got)
	}
}
