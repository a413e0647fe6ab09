package dbconn

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// HourlyBudget holds this process's statements on one server within a number per hour: a host's
// MAX_QUERIES_PER_HOUR counts every statement of the account, and once it is reached the server
// refuses the account's statements, the application's too when it shares the account (error
// 1226), until the hour ends. The copy and verification wait while the budget is spent (the
// throttle asks Low); what must go on meanwhile (replay, the probes) still counts.
type HourlyBudget struct {
	limit int64
	count func() int64 // statements sent so far
	now   func() time.Time

	mu    sync.Mutex
	marks []mark // the statement count once a minute, oldest first; the first is at or before an hour ago
}

type mark struct {
	at time.Time
	n  int64
}

// markEvery is how often the count is noted: the hour is measured to within it, on the safe side.
const markEvery = time.Minute

// HourlyBudget returns a budget of limit statements in any hour for this process's connections
// to the server c connects to. Statements sent before it was made count as sent just now.
func (c Config) HourlyBudget(limit int64) *HourlyBudget {
	return &HourlyBudget{limit: limit, count: func() int64 { return c.OwnUse().Statements }, now: time.Now}
}

// Used returns the statements sent in the last hour (at most a minute more: the oldest mark may be
// up to markEvery older than an hour ago).
func (b *HourlyBudget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	now, n := b.now(), b.count()
	if len(b.marks) == 0 {
		b.marks = append(b.marks, mark{at: now})
	}
	if last := b.marks[len(b.marks)-1]; now.Sub(last.at) >= markEvery {
		b.marks = append(b.marks, mark{at: now, n: n})
	}
	// Keep one mark at or before an hour ago: the count since then bounds the hour's.
	for len(b.marks) > 1 && !b.marks[1].at.After(now.Add(-time.Hour)) {
		b.marks = b.marks[1:]
	}
	return n - b.marks[0].n
}

// Low reports whether the budget is spent, and how, for the throttle.
func (b *HourlyBudget) Low() (string, bool) {
	used := b.Used()
	if used < b.limit {
		return "", false
	}
	return fmt.Sprintf("%d statements sent in the last hour, enginemig's share (%d) of the account's hourly limit", used, b.limit), true
}

// Wait returns once the budget has room, checking every few seconds; while it waits it says so
// once on log (nil: nowhere). It is the hold of work the throttle does not hold back
// (verification).
func (b *HourlyBudget) Wait(ctx context.Context, log *slog.Logger) error {
	said := false
	for {
		why, low := b.Low()
		if !low {
			return nil
		}
		if !said && log != nil {
			log.Info("waiting for the account's hourly budget", "why", why)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(budgetPoll):
		}
	}
}

// budgetPoll is how often a wait looks at the budget again: a minute's marks bound it anyway.
const budgetPoll = 5 * time.Second
