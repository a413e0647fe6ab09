package main

import (
	"fmt"
	"strings"
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

func TestSharesCutTheConversionAtItsStages(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	counts := make([]int64, 30) // 3 s of 100 ms buckets, 1 request each: 10 a second
	for i := range counts {
		counts[i] = 1
	}
	_, per := shares(counts, t0, t0.Add(3*time.Second), 10, []stageMark{{t0.Add(time.Second), "copy"}, {t0.Add(2 * time.Second), "verify"}})
	var got []string
	for _, s := range per {
		got = append(got, fmt.Sprintf("%s %s %.0f%%", s.stage, s.took, 100*s.mean))
	}
	if want := "start 1s 100%, copy 1s 100%, verify 1s 100%"; strings.Join(got, ", ") != want {
		t.Errorf("stages: %s, want %s", strings.Join(got, ", "), want)
	}
}
