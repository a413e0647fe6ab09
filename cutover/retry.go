package cutover

import (
	"errors"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/pace/lockwait"
)

// limit is the cut-over's deadline (Config.Timeout), shared by its waits and its attempts.
type limit struct {
	start   time.Time
	timeout time.Duration // 0: none
}

func newLimit(cfg Config) limit { return limit{start: time.Now(), timeout: cfg.Timeout} }

func (l limit) elapsed() time.Duration { return time.Since(l.start) }

func (l limit) passed() bool { return l.timeout > 0 && l.elapsed() >= l.timeout }

// left is the time until the limit (a day when there is none).
func (l limit) left() time.Duration {
	if l.timeout <= 0 {
		return 24 * time.Hour
	}
	return max(l.timeout-l.elapsed(), 0)
}

// says is the limit as a wait's description adds it.
func (l limit) says() string {
	if l.timeout <= 0 {
		return ""
	}
	return fmt.Sprintf("; gives up %s after the cut-over began (--cutover-timeout), keeping the shadow", l.timeout)
}

// retries reports failed attempts to the Observer as one wait (kind cutover) that lasts from the
// first failure to the swap or the limit, naming who held the table at the last one: status,
// metrics and the control socket show what keeps the swap out while apply keeps trying.
type retries struct {
	cfg    Config
	lim    limit
	update func(string, []lockwait.Session)
	done   func()
}

func (r *retries) failed(attempt int, err error, next time.Duration) {
	if r.cfg.Observer == nil {
		return
	}
	var nb *notGranted
	var blockers []lockwait.Session
	certain := false
	if errors.As(err, &nb) {
		blockers, certain = nb.holders.Sessions, nb.holders.Certain
	}
	what := fmt.Sprintf("cut-over attempt %d failed (%v); next in %s%s", attempt, err, next, r.lim.says())
	if r.update != nil {
		r.update(what, blockers)
		return
	}
	r.update, r.done = r.cfg.Observer.Waiting(lockwait.Wait{Kind: lockwait.KindCutover, What: what, Blockers: blockers,
		BlockersCertain: certain, Timeout: r.lim.timeout})
}

func (r *retries) end() {
	if r.done != nil {
		r.done()
	}
}

// notGranted is an attempt whose lock was not granted in time (ErrLockNotGranted), with the
// sessions that held the table.
type notGranted struct {
	holders lockwait.Holders
	err     error
}

func (n *notGranted) Error() string {
	return fmt.Sprintf("%v (the table is in use, held by %s): %v", ErrLockNotGranted, n.holders, n.err)
}

func (n *notGranted) Unwrap() []error { return []error{ErrLockNotGranted, n.err} }
