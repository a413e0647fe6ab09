package migration

import (
	"context"
	"errors"
	"fmt"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/throttle"
)

// settled is an error whose consequences the stage has already recorded: it is returned as is.
type settled struct{ err error }

func (s *settled) Error() string { return s.err.Error() }
func (s *settled) Unwrap() error { return s.err }

// pending is a cut-over that gave up (cutover.ErrGaveUp) with the copy finished: the shadow and
// the state are kept for a run that goes straight to the swap.
type pending struct{ err error }

func (p *pending) Error() string { return p.err.Error() }
func (p *pending) Unwrap() error { return p.err }

// keepShadow is a failure after which the shadow must not be dropped (it was never created, or
// the tables' state is unclear).
type keepShadow struct{ err error }

func (k *keepShadow) Error() string { return k.err.Error() }
func (k *keepShadow) Unwrap() error { return k.err }

// stopped ends a migration that failed in a stage. The shadow is dropped so a retry starts
// clean, except when the connection was lost: then the next run resumes from the state table.
func (m *migrator) stopped(ctx context.Context, err error) (*Result, error) {
	var s *settled
	if errors.As(err, &s) {
		if m.res.Cutover != nil {
			return m.res, s.err
		}
		return nil, s.err
	}
	if errors.Is(err, errSimulatedCrash) {
		return nil, err
	}
	if derr, ok := m.diskStopped(ctx, err); ok {
		return nil, derr
	}
	// A write of ours that something else interrupted (it may have kept part, and replicas stop on
	// it) is no lost connection to resume from, even when the interruption ended the connection.
	if dbconn.IsInterruptedWrite(err) {
		return nil, m.fail(ctx, err, true)
	}
	if dbconn.IsConnectionLoss(err) && ctx.Err() == nil {
		return nil, m.suspend(ctx, err)
	}
	var p *pending
	if errors.As(err, &p) {
		return nil, m.pend(ctx, p.err)
	}
	var k *keepShadow
	if errors.As(err, &k) {
		return nil, m.fail(ctx, k.err, false)
	}
	return nil, m.fail(ctx, err, true)
}

// fail records the failure, drops the shadow when asked and returns err (coded FailedSafe if it
// had no code).
func (m *migrator) fail(ctx context.Context, err error, drop bool) error {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBudget)
	defer cancel()
	if m.pipe != nil {
		m.pipe.Stop() // no replay batch may land after the drop
	}
	dropped := false
	if drop {
		if derr := m.dropShadow(bg); derr != nil {
			m.log.Warn("could not drop the shadow; `enginemig cleanup` removes it", "error", derr)
		} else {
			dropped = true
		}
	}
	err = m.coded(err)
	if lt := m.ctl.waits.TimeoutErr(); lt != nil {
		err = lt
	} else if rs := replicaStopped(ctx, err); rs != nil {
		err = rs
	} else if errors.Is(err, context.Canceled) {
		what := "interrupted; the original is unchanged"
		if dropped {
			what = "interrupted; the shadow table was dropped and the original is unchanged"
		}
		err = outcome.New(outcome.FailedSafe, errors.New(what), "")
	}
	m.rec.finish(bg, state.StageFailed, err.Error())
	m.hook(bg, PointFailure)
	return err
}

// pend records a cut-over that could not get in before --cutover-timeout: capture stops (its
// position saved for the next run), the shadow, its capture and the state stay, and the record
// stays at the cut-over, so running the same apply again goes straight to the swap.
func (m *migrator) pend(ctx context.Context, err error) error {
	if m.pipe != nil {
		m.pipe.Stop()
	}
	m.rec.update(context.WithoutCancel(ctx), func(st *state.State) { st.Error = "cut-over pending: " + err.Error() })
	m.hook(context.WithoutCancel(ctx), PointFailure)
	return outcome.New(outcome.CutoverPending, fmt.Errorf("cut-over: %w", err),
		"the copy is done and the shadow is kept: run the same apply again to go straight to the cut-over (with a higher --cutover-timeout, or once the sessions named here are gone), or `enginemig cleanup` to drop the shadow")
}

// suspend records a migration interrupted by a lost connection: the shadow and the state stay so
// that running the same apply again resumes it.
func (m *migrator) suspend(ctx context.Context, err error) error {
	if m.pipe != nil {
		m.pipe.Stop()
	}
	m.rec.update(context.WithoutCancel(ctx), func(st *state.State) { st.Error = "connection lost: " + err.Error() })
	return outcome.New(outcome.NeedsAttention, fmt.Errorf("%w to the server: %w", errSuspended, err),
		"the shadow table and the progress are kept: run the same apply again to resume")
}

// replicaStopped is the run's end when a watched replica's SQL thread stopped on an error
// (throttle.ReplicaStoppedError: what the copy's throttle returned, or the cause ctx was
// cancelled with at another stage), nil otherwise.
func replicaStopped(ctx context.Context, err error) error {
	rs := (*throttle.ReplicaStoppedError)(nil)
	if !errors.As(context.Cause(ctx), &rs) && !errors.As(err, &rs) {
		return nil
	}
	return outcome.New(outcome.NeedsAttention, fmt.Errorf("run stopped: %w", rs),
		"see SHOW REPLICA STATUS on that replica and repair it, then run the same command again. If it stopped on a "+
			"statement of enginemig's ('Query partially completed on the master': a write that something interrupted), skip "+
			"that one event there (MariaDB: STOP SLAVE; SET GLOBAL sql_slave_skip_counter = 1; START SLAVE): the next run "+
			"writes those rows again")
}
