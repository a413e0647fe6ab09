package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The conversion is cut at its stages' marks, and each stage's reads and writes give their own
// p50 and p99, apart from the statements before the conversion and after it; a tool without
// marks is one "conversion" stage. Synthetic statements, no timing.
func TestLatencyIsSplitByStage(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC)
	var s stmts
	// 100 reads and 100 writes in each second from -1 s (before the conversion) to 4 s (after
	// it): second k's reads take (k+2) ms, except the slowest of each hundred, ten times that;
	// its writes twice the reads.
	for k := -1; k <= 4; k++ {
		for i := 0; i < 100; i++ {
			end := t0.Add(time.Duration(k)*time.Second + time.Duration(i)*10*time.Millisecond)
			d := time.Duration(k+2) * time.Millisecond
			if i == 99 {
				d *= 10
			}
			s.add(false, end, d)
			s.add(true, end, 2*d)
		}
	}
	marks := []stageMark{{t0.Add(-500 * time.Millisecond), "copy"}, {t0.Add(time.Second), "indexes"}, {t0.Add(2 * time.Second), "verify"}, {t0.Add(2500 * time.Millisecond), "cutover"}}
	per := latencyByStage(s, t0, t0.Add(3*time.Second), marks)
	var got []string
	for _, p := range per {
		got = append(got, fmt.Sprintf("%s %.1fs %d/%d r %.0f/%.0f w %.0f/%.0f", p.Stage, p.Took, p.Reads, p.Writes, p.ReadP50Ms, p.ReadP99Ms, p.WriteP50Ms, p.WriteP99Ms))
	}
	want := []string{
		"copy 1.0s 100/100 r 2/2 w 4/4",    // second 0: 99 reads of 2 ms, one of 20: p99 is the 99th
		"indexes 1.0s 100/100 r 3/3 w 6/6", // second 1
		"verify 0.5s 50/50 r 4/4 w 8/8",    // the first half of second 2
		"cutover 0.5s 50/50 r 4/40 w 8/80", // its second half, with the slowest read and write
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("per stage:\n  got  %s\n  want %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
	if l := latencyOf(s, t0.Add(-time.Second), t0); l.Reads != 100 || l.ReadP50Ms != 1 || l.ReadP99Ms != 1 || l.WriteP99Ms != 2 {
		t.Errorf("before: %+v, want 100 reads of 1 ms (p99 1), writes of 2", l)
	}
	if l := latencyOf(s, t0, t0.Add(3*time.Second)); l.Reads != 300 || l.ReadP50Ms != 3 || l.ReadP99Ms != 4 || l.WriteP99Ms != 8 {
		t.Errorf("during: %+v, want 300 reads, p50 3 ms, p99 4 ms (the three slow ones are the top 1 %%), writes p99 8", l)
	}
	whole := latencyByStage(s, t0, t0.Add(3*time.Second), nil)
	if len(whole) != 1 || whole[0].Stage != "conversion" || whole[0].Reads != 300 {
		t.Errorf("without stages: %+v, want one conversion stage of 300 reads", whole)
	}
	if got := formatStageLatency(per[:1]); got != "copy 1.0s: reads p50 2.00ms p99 2.00ms, writes p50 4.00ms p99 4.00ms" {
		t.Errorf("text: %q", got)
	}
	b, err := json.Marshal(per[0])
	if err != nil || !strings.Contains(string(b), `"stage":"copy","seconds":1,"reads":100,"read_p50_ms":2,"read_p99_ms":2,"writes":100,"write_p50_ms":4,"write_p99_ms":4`) {
		t.Errorf("JSON: %s (%v)", b, err)
	}
}
