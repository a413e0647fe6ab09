package throttle

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Status is a snapshot of the throttle's view, JSON-friendly for `enginemig control status`.
type Status struct {
	Throttled bool `json:"throttled"`
	// Reason says why the copy waits (empty when it does not).
	Reason string `json:"reason,omitempty"`
	// Since is when the current throttled (or free) period began.
	Since  time.Time `json:"since"`
	Paused bool      `json:"paused"`
	// ThreadsRunning is the last Threads_running reading, -1 when unknown.
	ThreadsRunning    int64           `json:"threads_running"`
	MaxThreadsRunning int             `json:"max_threads_running"`
	MaxLag            time.Duration   `json:"-"`
	MaxLagSeconds     float64         `json:"max_lag_seconds,omitempty"`
	Replicas          []ReplicaStatus `json:"replicas,omitempty"`
}

// ReplicaStatus is one replica's lag as last measured.
type ReplicaStatus struct {
	Name string `json:"name"`
	// Measured is false when lag cannot be measured (Error says why); the copy is then paused.
	Measured   bool          `json:"measured"`
	Lag        time.Duration `json:"-"`
	LagSeconds float64       `json:"lag_seconds"`
	Error      string        `json:"error,omitempty"`
}

// verdict is what evaluateLocked decides; key identifies the kind of reason so a change of kind
// is logged but a lag growing from 1.2 s to 1.5 s is not.
type verdict struct {
	throttled bool
	reasons   []string
	keys      []string
	replicas  []ReplicaStatus
}

func (v *verdict) add(key, reason string) {
	v.throttled = true
	v.keys = append(v.keys, key)
	v.reasons = append(v.reasons, reason)
}

// Status returns the current state.
func (t *Throttler) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.evaluateLocked(time.Now())
	st := Status{Throttled: v.throttled, Reason: strings.Join(v.reasons, "; "), Since: t.since, Paused: t.paused,
		ThreadsRunning: -1, MaxThreadsRunning: t.maxThreads, Replicas: v.replicas}
	if !t.threads.at.IsZero() && t.threads.err == nil {
		st.ThreadsRunning = t.threads.value
	}
	if len(t.replicas) > 0 {
		st.MaxLag, st.MaxLagSeconds = t.maxLag, t.maxLag.Seconds()
	}
	return st
}

// evaluateLocked decides whether the copy must wait now. Anything that cannot be measured, or
// was measured too long ago, throttles: the copy is the only thing that can wait, and an unknown
// lag may be a large one.
func (t *Throttler) evaluateLocked(now time.Time) verdict {
	var v verdict
	if !t.started {
		v.add("not-started", "throttle not started")
	}
	if t.paused {
		v.add("paused", "paused by operator")
	}
	if t.maxThreads > 0 {
		switch {
		case t.threads.at.IsZero():
			v.add("threads-unknown", "cannot read Threads_running yet")
		case t.threads.err != nil:
			v.add("threads-unknown", fmt.Sprintf("cannot read Threads_running: %v", t.threads.err))
		case now.Sub(t.threads.at) > t.staleAfter():
			v.add("threads-unknown", fmt.Sprintf("cannot read Threads_running: no answer for %s", round(now.Sub(t.threads.at))))
		case t.threads.value > int64(t.maxThreads):
			v.add("threads", fmt.Sprintf("Threads_running %d > %d", t.threads.value, t.maxThreads))
		}
	}
	t.flowControlLocked(&v, now)
	if t.cfg.Disk != nil {
		if why, low := t.cfg.Disk.Low(); low {
			v.add("disk", why)
		}
	}
	if t.cfg.Account != nil {
		if why, low := t.cfg.Account.Low(); low {
			v.add("account-hourly", why)
		}
	}
	if t.cfg.Window != nil {
		if why, low := t.cfg.Window.Low(); low {
			v.add("window", why)
		}
	}
	hbStale := ""
	if len(t.replicas) > 0 {
		if age := now.Sub(t.hb.okAt); age > t.staleAfter() {
			// Without fresh writes a stopped replica looks caught up: lag is unknown.
			hbStale = fmt.Sprintf("heartbeat not written on the primary for %s", round(age))
			if t.hb.err != nil {
				hbStale += fmt.Sprintf(" (%v)", t.hb.err)
			}
		}
	}
	for _, r := range t.replicas {
		rs := ReplicaStatus{Name: r.name}
		switch {
		case hbStale != "":
			rs.Error = hbStale
		case r.seq.at.IsZero():
			rs.Error = "not checked yet"
		case r.seq.err != nil:
			rs.Error = r.seq.err.Error()
		case now.Sub(r.seq.at) > t.staleAfter():
			rs.Error = fmt.Sprintf("no answer for %s", round(now.Sub(r.seq.at)))
		default:
			rs.Measured = true
			rs.Lag = t.lagLocked(r.seq.value, now)
			rs.LagSeconds = rs.Lag.Seconds()
		}
		if th := r.threads; th.read && !th.running && th.errno != 0 {
			v.add("stopped:"+r.name, fmt.Sprintf("replica %s: its SQL thread stopped on error %d: %s", r.name, th.errno, th.message))
		}
		if !rs.Measured {
			v.add("unmeasured:"+r.name, fmt.Sprintf("cannot measure lag on %s: %s", r.name, rs.Error))
		} else if rs.Lag > t.maxLag {
			v.add("lag:"+r.name, fmt.Sprintf("replica %s lags %s (max %s)", r.name, round(rs.Lag), t.maxLag))
		}
		v.replicas = append(v.replicas, rs)
	}
	t.logChangeLocked(v, now)
	return v
}

func (t *Throttler) logChangeLocked(v verdict, now time.Time) {
	key := strings.Join(v.keys, ",")
	if key == t.lastKey || !t.started {
		return
	}
	if v.throttled != (t.lastKey != "") {
		t.since = now
	}
	t.lastKey = key
	if t.stopped {
		return
	}
	reason := strings.Join(v.reasons, "; ")
	if t.cfg.Logger == nil {
		return
	}
	switch {
	case !v.throttled:
		t.cfg.Logger.Info("copy resumed (throttle clear)")
	case v.unmeasured() || slices.Contains(v.keys, "disk"):
		// Failing closed on something that cannot be measured needs a look; lag or load does not.
		t.cfg.Logger.Warn("copy throttled", slog.String("reason", reason))
	default:
		t.cfg.Logger.Info("copy throttled", slog.String("reason", reason))
	}
}

// unmeasured reports whether the copy waits (also) because something could not be measured.
func (v *verdict) unmeasured() bool {
	for _, k := range v.keys {
		if k == "threads-unknown" || strings.HasPrefix(k, "unmeasured:") || strings.HasPrefix(k, "stopped:") {
			return true
		}
	}
	return false
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
