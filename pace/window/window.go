// Package window keeps work inside the hours a change ticket allows: a schedule of weekly spans
// ("Mon-Fri 00:30-06:00", "Sat,Sun 22:00-06:00", "daily 01:00-05:00") in one time zone, which
// says whether a moment is inside, when the next span opens or the current one closes, and when a
// given amount of work done only inside it would end (the ETA across nights).
package window

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schedule is a set of weekly spans in one location. The zero value and nil are always open.
type Schedule struct {
	spans []span
	loc   *time.Location
	zone  string // how the location was named, for messages ("local", "server", "UTC" ...)
	text  string // the specs as given
}

// span is open on its days from from to to (offsets from midnight); to <= from crosses midnight,
// the part after midnight belonging to the next day.
type span struct {
	days     [7]bool // indexed by time.Weekday
	from, to time.Duration
}

var dayNames = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// ErrSyntax wraps every parse error; the message says what was expected.
var ErrSyntax = errors.New("a window is [DAYS] HH:MM-HH:MM, e.g. \"Mon-Fri 00:30-06:00\", \"Sat,Sun 22:00-06:00\" or \"daily 01:00-05:00\" (seconds allowed: HH:MM:SS)")

// Parse reads specs (each "[DAYS] FROM-TO"; DAYS a day, a range Mon-Fri, a list Sat,Sun, "daily"
// or absent for every day) in loc, named zone in messages. No specs: nil, always open.
func Parse(specs []string, loc *time.Location, zone string) (*Schedule, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	if loc == nil {
		loc, zone = time.Local, "local"
	}
	s := &Schedule{loc: loc, zone: zone, text: strings.Join(specs, "; ")}
	for _, spec := range specs {
		sp, err := parseSpan(spec)
		if err != nil {
			return nil, fmt.Errorf("window %q: %w", spec, err)
		}
		s.spans = append(s.spans, sp)
	}
	return s, nil
}

func parseSpan(spec string) (span, error) {
	var sp span
	fields := strings.Fields(spec)
	if len(fields) == 0 || len(fields) > 2 {
		return sp, ErrSyntax
	}
	hours := fields[len(fields)-1]
	if len(fields) == 2 {
		if err := parseDays(fields[0], &sp.days); err != nil {
			return sp, err
		}
	} else {
		sp.days = [7]bool{true, true, true, true, true, true, true}
	}
	from, to, ok := strings.Cut(hours, "-")
	if !ok {
		return sp, ErrSyntax
	}
	var err error
	if sp.from, err = parseClock(from); err != nil {
		return sp, err
	}
	if sp.to, err = parseClock(to); err != nil {
		return sp, err
	}
	if sp.from == sp.to {
		return sp, fmt.Errorf("%w: it opens and closes at the same time", ErrSyntax)
	}
	return sp, nil
}

func parseDays(text string, days *[7]bool) error {
	if strings.EqualFold(text, "daily") {
		*days = [7]bool{true, true, true, true, true, true, true}
		return nil
	}
	for _, part := range strings.Split(text, ",") {
		a, b, isRange := strings.Cut(part, "-")
		first, ok := dayNames[strings.ToLower(a)]
		if !ok {
			return fmt.Errorf("%w: unknown day %q (Mon, Tue, Wed, Thu, Fri, Sat, Sun)", ErrSyntax, a)
		}
		last := first
		if isRange {
			if last, ok = dayNames[strings.ToLower(b)]; !ok {
				return fmt.Errorf("%w: unknown day %q (Mon, Tue, Wed, Thu, Fri, Sat, Sun)", ErrSyntax, b)
			}
		}
		for d := first; ; d = (d + 1) % 7 {
			days[d] = true
			if d == last {
				break
			}
		}
	}
	return nil
}

func parseClock(text string) (time.Duration, error) {
	var h, m, s int
	n, err := fmt.Sscanf(text, "%d:%d:%d", &h, &m, &s)
	if n < 2 || (err != nil && n != 2) || h < 0 || h > 24 || m < 0 || m > 59 || s < 0 || s > 59 || (h == 24 && m+s > 0) {
		return 0, fmt.Errorf("%w: bad time %q", ErrSyntax, text)
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second, nil
}

// String is the schedule as given, with its zone ("Mon-Fri 00:30-06:00 (local time)").
func (s *Schedule) String() string {
	if s == nil {
		return "always"
	}
	return s.text + " (" + s.zone + " time)"
}

// intervals returns the open intervals of the spans that started on the day of t or the day
// before (a span crossing midnight reaches into t's day), in any order.
func (s *Schedule) intervals(day time.Time) [][2]time.Time {
	var out [][2]time.Time
	for _, back := range []int{1, 0} {
		d := day.AddDate(0, 0, -back)
		midnight := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, s.loc)
		for _, sp := range s.spans {
			if !sp.days[midnight.Weekday()] {
				continue
			}
			end := sp.to
			if sp.to <= sp.from {
				end += 24 * time.Hour
			}
			out = append(out, [2]time.Time{at(midnight, sp.from), at(midnight, end)})
		}
	}
	return out
}

// at is midnight plus off in wall-clock terms (a DST day is 23 or 25 hours long).
func at(midnight time.Time, off time.Duration) time.Time {
	days := int(off / (24 * time.Hour))
	off -= time.Duration(days) * 24 * time.Hour
	d := midnight.AddDate(0, 0, days)
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, d.Location()).Add(off)
}

// Open reports whether t is inside the schedule (nil: always).
func (s *Schedule) Open(t time.Time) bool {
	_, ok := s.closes(t)
	return ok
}

// closes is the end of the open period t is in (merging spans that touch), and whether t is in one.
func (s *Schedule) closes(t time.Time) (time.Time, bool) {
	if s == nil || len(s.spans) == 0 {
		return time.Time{}, true
	}
	t = t.In(s.loc)
	end, open := t, false
	// Spans that cover whole days ("daily 00:00-24:00") touch without end: a period longer than
	// a week is open for good as far as anyone waits, so it ends there.
	for moved := true; moved && end.Sub(t) < 8*24*time.Hour; {
		moved = false
		for _, iv := range s.intervals(end) {
			if !iv[0].After(end) && iv[1].After(end) {
				end, open, moved = iv[1], true, true
			}
		}
	}
	return end, open
}

// Closes is when the open period t is in ends (spans that touch count as one); zero when t is
// outside, or for an always-open schedule.
func (s *Schedule) Closes(t time.Time) time.Time {
	end, open := s.closes(t)
	if !open {
		return time.Time{}
	}
	return end
}

// Next is t when t is inside, else when the schedule next opens (within the coming eight days).
func (s *Schedule) Next(t time.Time) time.Time {
	if s.Open(t) {
		return t
	}
	t = t.In(s.loc)
	var best time.Time
	for day := 0; day <= 8; day++ {
		for _, iv := range s.intervals(t.AddDate(0, 0, day)) {
			if iv[0].After(t) && (best.IsZero() || iv[0].Before(best)) {
				best = iv[0]
			}
		}
		if !best.IsZero() {
			return best
		}
	}
	return best
}

// Finish is when work, done only while the schedule is open, ends if it starts at from: the ETA
// of a copy that pauses outside its window.
func (s *Schedule) Finish(from time.Time, work time.Duration) time.Time {
	if s == nil || len(s.spans) == 0 {
		return from.Add(work)
	}
	t := from
	for i := 0; work > 0 && i < 10000; i++ {
		t = s.Next(t)
		if t.IsZero() {
			return time.Time{}
		}
		end, _ := s.closes(t)
		if avail := end.Sub(t); avail >= work {
			return t.Add(work)
		} else {
			work -= avail
			t = end
		}
	}
	return t
}

// Low is the schedule as a throttle reason (throttle.Config.Window): closed, with why and until
// when.
func (s *Schedule) Low() (string, bool) {
	return s.LowAt(time.Now())
}

// LowAt is Low at t.
func (s *Schedule) LowAt(t time.Time) (string, bool) {
	if s.Open(t) {
		return "", false
	}
	next := s.Next(t)
	return fmt.Sprintf("outside the window %s; it opens at %s (in %s)", s, next.In(s.loc).Format("Mon 15:04:05"),
		next.Sub(t).Round(time.Second)), true
}

// OpenBetween is how much of [from, to) lies inside the schedule: the time a paused-outside copy
// actually had, for its rate.
func (s *Schedule) OpenBetween(from, to time.Time) time.Duration {
	if s == nil || len(s.spans) == 0 {
		return max(to.Sub(from), 0)
	}
	var open time.Duration
	for t, i := from, 0; t.Before(to) && i < 10000; i++ {
		if t = s.Next(t); t.IsZero() || !t.Before(to) {
			break
		}
		end, _ := s.closes(t)
		if end.After(to) {
			end = to
		}
		open += end.Sub(t)
		t = end
	}
	return open
}
