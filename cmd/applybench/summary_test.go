package main

import (
	"strings"
	"testing"
	"time"
)

func TestSummaryTakesMediansOfRunsThatWereNotVoid(t *testing.T) {
	runs := []loaded{
		{build: "before", took: 30 * time.Second, mean: 0.90, worst: 0.5, p99: 80 * time.Millisecond, stall: 40 * time.Millisecond, during: latency{ReadP99Ms: 3, WriteP99Ms: 5}},
		{build: "after", took: 20 * time.Second, mean: 0.99, worst: 0.9, p99: 60 * time.Millisecond, stall: 30 * time.Millisecond, during: latency{ReadP99Ms: 1.5, WriteP99Ms: 2}},
		{build: "before", took: 50 * time.Second, mean: 0.96, worst: 0.7, p99: 100 * time.Millisecond, stall: 50 * time.Millisecond, during: latency{ReadP99Ms: 4, WriteP99Ms: 12}},
		{build: "after", took: 90 * time.Second, mean: 0.10, worst: 0.0, void: true, during: latency{ReadP99Ms: 50, WriteP99Ms: 50}},
		{build: "before", took: 40 * time.Second, mean: 0.94, worst: 0.6, p99: 90 * time.Millisecond, stall: 45 * time.Millisecond, during: latency{ReadP99Ms: 3.5, WriteP99Ms: 7}},
	}
	got := summarize(runs, []build{{name: "before"}, {name: "after"}, {name: "gh-ost"}})
	for _, want := range []string{
		"before: application 94% (worst second 60%), wall 40.0s, p99 90ms (reads 3.50ms, writes 7.00ms), stall 45ms; 3 run(s): 90% in 30.0s, 96% in 50.0s, 94% in 40.0s\n",
		"after: application 99% (worst second 90%), wall 20.0s, p99 60ms (reads 1.50ms, writes 2.00ms), stall 30ms; 1 run(s): 99% in 20.0s; 1 void\n",
		"gh-ost: every run void (0)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
