package window

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var berlin = func() *time.Location {
	l, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		return time.FixedZone("CET", 3600)
	}
	return l
}()

func mustParse(t *testing.T, specs ...string) *Schedule {
	t.Helper()
	s, err := Parse(specs, berlin, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// at2026 is a wall-clock time in Berlin in the week of Monday 2026-12-07.
func at2026(day int, clock string) time.Time {
	tm, err := time.ParseInLocation("2006-01-02 15:04:05", "2026-12-"+twoDigits(day)+" "+clock, berlin)
	if err != nil {
		panic(err)
	}
	return tm
}

func twoDigits(d int) string { return string(rune('0'+d/10)) + string(rune('0'+d%10)) }

func TestOpenAndNext(t *testing.T) {
	s := mustParse(t, "Mon-Fri 00:30-06:00", "Sat,Sun 22:00-06:00")
	for _, c := range []struct {
		when       time.Time
		open       bool
		next, ends string
	}{
		{at2026(8, "00:29:59"), false, "2026-12-08 00:30:00", ""},  // Tuesday, before
		{at2026(8, "00:30:00"), true, "", "2026-12-08 06:00:00"},   // opens
		{at2026(8, "05:59:59"), true, "", "2026-12-08 06:00:00"},   // still
		{at2026(8, "06:00:00"), false, "2026-12-09 00:30:00", ""},  // closed, next is Wednesday's
		{at2026(7, "00:29:59"), true, "", "2026-12-07 06:00:00"},   // Monday: Sunday's span still open
		{at2026(11, "23:00:00"), false, "2026-12-12 22:00:00", ""}, // Friday night: Saturday 22:00
		{at2026(12, "23:30:00"), true, "", "2026-12-13 06:00:00"},  // Saturday's crosses midnight
		{at2026(13, "03:00:00"), true, "", "2026-12-13 06:00:00"},  // Sunday morning, Saturday's span
		{at2026(13, "23:00:00"), true, "", "2026-12-14 06:00:00"},  // Sunday's span then Monday's touch: one period
		{at2026(14, "05:00:00"), true, "", "2026-12-14 06:00:00"},  // Monday morning
		{at2026(13, "12:00:00"), false, "2026-12-13 22:00:00", ""}, // Sunday noon
	} {
		if got := s.Open(c.when); got != c.open {
			t.Errorf("%s: open %v, want %v", c.when, got, c.open)
		}
		if c.next != "" {
			if got := s.Next(c.when).Format("2006-01-02 15:04:05"); got != c.next {
				t.Errorf("%s: next %s, want %s", c.when, got, c.next)
			}
		} else if got := s.Closes(c.when).Format("2006-01-02 15:04:05"); got != c.ends {
			t.Errorf("%s: closes %s, want %s", c.when, got, c.ends)
		}
	}
}

func TestFinishCountsOnlyOpenTime(t *testing.T) {
	s := mustParse(t, "daily 01:00-05:00")
	start := at2026(7, "04:00:00")
	// 1 h tonight, 4 h tomorrow night, 1 h the night after: 6 h of work.
	if got, want := s.Finish(start, 6*time.Hour).Format("2006-01-02 15:04"), "2026-12-09 02:00"; got != want {
		t.Errorf("finish %s, want %s", got, want)
	}
	if got, want := s.Finish(at2026(7, "12:00:00"), 30*time.Minute).Format("2006-01-02 15:04"), "2026-12-08 01:30"; got != want {
		t.Errorf("starting outside: finish %s, want %s", got, want)
	}
	var always *Schedule
	if got := always.Finish(start, time.Hour); !got.Equal(start.Add(time.Hour)) || !always.Open(start) {
		t.Errorf("nil schedule: finish %s, open %v", got, always.Open(start))
	}
}

func TestSecondsForShortWindows(t *testing.T) {
	s := mustParse(t, "12:00:05-12:00:10")
	if s.Open(at2026(7, "12:00:04")) || !s.Open(at2026(7, "12:00:05")) || s.Open(at2026(7, "12:00:10")) {
		t.Fatal("a five-second window")
	}
	why, low := s.LowAt(at2026(7, "12:00:00"))
	if !low || !strings.Contains(why, "opens at Mon 12:00:05 (in 5s)") || !strings.Contains(why, "(Europe/Berlin time)") {
		t.Errorf("low: %v %q", low, why)
	}
}

func TestBadWindowsSayWhatIsExpected(t *testing.T) {
	for _, bad := range []string{"", "Mon-Fri", "Mon-Fri 00:30", "Mo 00:30-06:00", "Mon-Fri 25:00-06:00", "00:30-00:30", "Mon-Fri 0030-0600", "a b c"} {
		_, err := Parse([]string{bad}, berlin, "Europe/Berlin")
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "Mon-Fri 00:30-06:00") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if s, err := Parse(nil, nil, ""); s != nil || err != nil {
		t.Errorf("no windows: %v, %v", s, err)
	}
}

func TestOpenBetweenIsFinishReversed(t *testing.T) {
	s := mustParse(t, "daily 01:00-05:00")
	start := at2026(7, "04:00:00")
	if got := s.OpenBetween(start, at2026(9, "02:00:00")); got != 6*time.Hour {
		t.Errorf("open between Monday 04:00 and Wednesday 02:00: %s, want 6h", got)
	}
	if got := s.OpenBetween(at2026(7, "06:00:00"), at2026(7, "23:00:00")); got != 0 {
		t.Errorf("a closed afternoon: %s", got)
	}
	for _, work := range []time.Duration{time.Minute, 3 * time.Hour, 9*time.Hour + 30*time.Minute} {
		if got := s.OpenBetween(start, s.Finish(start, work)); got != work {
			t.Errorf("OpenBetween(Finish(%s)) = %s", work, got)
		}
	}
	var always *Schedule
	if got := always.OpenBetween(start, start.Add(time.Hour)); got != time.Hour {
		t.Errorf("nil schedule: %s", got)
	}
}

// A schedule open around the clock has no end to find: its period ends a week on, not never.
func TestAroundTheClock(t *testing.T) {
	s := mustParse(t, "daily 00:00-24:00")
	now := at2026(7, "12:00:00")
	if !s.Open(now) || s.Closes(now).Before(now.Add(7*24*time.Hour)) || s.Finish(now, time.Hour) != now.Add(time.Hour) {
		t.Errorf("open %v, closes %s, finish %s", s.Open(now), s.Closes(now), s.Finish(now, time.Hour))
	}
}
