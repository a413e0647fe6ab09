package dbconn

import (
	"testing"
	"time"
)

// The budget counts the statements of the last hour, never fewer: what was sent more than an
// hour ago stops counting, within a minute.
func TestHourlyBudgetCountsTheLastHour(t *testing.T) {
	var sent int64
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	b := &HourlyBudget{limit: 100, count: func() int64 { return sent }, now: func() time.Time { return now }}
	step := func(d time.Duration, n int64) {
		now = now.Add(d)
		sent += n
		b.Used()
	}
	sent = 30 // before the budget was made: counts as just sent
	if got := b.Used(); got != 30 {
		t.Fatalf("at the start: %d, want 30", got)
	}
	for range 59 { // a statement a minute for 59 minutes
		step(time.Minute, 1)
	}
	if got := b.Used(); got != 89 {
		t.Fatalf("after 59 minutes: %d, want 89", got)
	}
	step(0, 20)
	if why, low := b.Low(); !low || why == "" {
		t.Fatalf("109 of 100 in the hour: not low")
	}
	step(90*time.Second, 0) // the first 30 are more than an hour old, but not a minute more
	if got := b.Used(); got != 109 {
		t.Fatalf("an hour and a half minute on: %d, want 109 (the hour's, and the minute's before it)", got)
	}
	step(time.Minute, 0) // now the first minute's 31 are
	if got := b.Used(); got != 78 {
		t.Fatalf("an hour and two and a half minutes on: %d, want 78", got)
	}
	if _, low := b.Low(); low {
		t.Fatalf("78 of 100: low")
	}
	step(2*time.Hour, 0)
	if got := b.Used(); got != 0 {
		t.Fatalf("two quiet hours on: %d, want 0", got)
	}
}
