package verify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/throttle"
)

// compare checksums the range in source and target at one consistent point: the source is
// read-locked (MyISAM has no snapshots), and the target is given time to catch up with every
// change made before the lock, so both sides show the same moment. The source's checksum runs
// while the target catches up.
//
// With release, the lock covers only that: once the target has caught up, replay is held (Hold),
// the source unlocked, and the target checksummed at the moment it reached; replay then goes on.
// The application's writers wait for the source's checksum and the catch-up, not for the
// target's checksum too. Without it, both sides are checksummed at once under the lock, which is
// quicker overall while nobody waits for the table.
//
// The target gets w to catch up (waitFor).
//
// released, when not nil, is called once the source is unlocked (not when locking it failed).
func (v *verifier) compare(ctx context.Context, r table.Range, release bool, w wait, released func(comparison)) (c comparison, err error) {
	conn, err := v.db.Conn(ctx)
	if err != nil {
		return c, err
	}
	defer conn.Close()
	// The second, aliased lock changes nothing but the statement's shape: plan's lock-tables check
	// tells enginemig's own LOCK TABLES from the application's by it.
	lock := "LOCK TABLES " + v.q.Source() + " READ, " + v.q.Source() + " AS `_enginemig_verify` READ"
	for _, l := range v.cfg.LockWith {
		lock += ", " + l
	}
	asked := time.Now()
	if err := v.locker.Take(ctx, conn, mdl.VerifyChunk, lock); err != nil {
		return c, fmt.Errorf("verify: lock %s: %w", v.q.Source(), err)
	}
	locked := time.Now()
	waited := locked.Sub(asked)
	unlock := func() error {
		if !c.unlocked.IsZero() {
			return nil
		}
		c.unlocked = time.Now()
		c.held = c.unlocked.Sub(locked)
		_, err := conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
		if released != nil {
			released(c)
		}
		// A connection the driver closed (a statement cancelled at its deadline: the catch-up
		// past its patience) took its locks with it.
		if err != nil && !errors.Is(err, sql.ErrConnDone) {
			return fmt.Errorf("verify: unlock: %w", err)
		}
		return nil
	}
	defer func() {
		err = errors.Join(err, unlock())
		c.waited, c.after = waited, time.Since(c.unlocked)
	}()
	if len(v.cfg.LockWith) > 0 {
		return v.compareInSession(ctx, conn, r, w)
	}
	if faultsOf(ctx).VerifyRelease() != forceNever {
		m, err := v.target.Mark(ctx, conn)
		if err != nil {
			return c, fmt.Errorf("verify: mark the target: %w", err)
		}
		if m.Lift != nil {
			err = v.compareMarked(ctx, conn, r, m, &c, unlock)
			return c, err
		}
	}
	dstDone := make(chan sum, 1)
	go func() { dstDone <- v.catchUp(ctx, r, !release, w) }()
	src := v.checksum(ctx, conn, r, false)
	c.sumTime = src.took
	dst := <-dstDone
	if err = errors.Join(src.err, dst.err); err != nil {
		return c, err
	}
	if !release {
		c.rows, c.same, c.sumTime = src.n, src.equal(dst), max(src.took, dst.took)
		return c, nil
	}
	err = v.target.Hold(func() error {
		if err := unlock(); err != nil {
			return err
		}
		if err := throttle.Sleep(ctx, faultsOf(ctx).VerifyHold()); err != nil {
			return err
		}
		dst = v.checksum(ctx, v.db, r, true)
		return dst.err
	})
	c.rows, c.same = src.n, src.equal(dst)
	return c, err
}

// compareMarked compares with a target stopped at the source's locked moment (Mark): the target
// is checksummed on a session of its own once it reached the mark, beside the source's checksum,
// and the source's lock covers that checksum only. The application's writers wait for nothing
// else; the target waits at the mark until its checksum is done. Unlike the other ways, nothing
// waits for the target under the lock, so a target that is behind costs the application nothing
// (it is waited for, up to behindWait, with the source unlocked).
func (v *verifier) compareMarked(ctx context.Context, conn *sql.Conn, r table.Range, m Mark, c *comparison, unlock func() error) error {
	defer m.Lift()
	unlocked := make(chan struct{})
	dstDone := make(chan sum, 1)
	go func() {
		waitCtx, cancel := context.WithTimeout(ctx, behindWait)
		defer cancel()
		if err := m.Reached(waitCtx); err != nil {
			dstDone <- sum{err: fmt.Errorf("verify: the target did not reach the source's lock within %s: %w", behindWait, err)}
			return
		}
		if hold := faultsOf(ctx).VerifyHold(); hold > 0 { // a test's: the target compared only after writes resumed
			<-unlocked
			if err := throttle.Sleep(ctx, hold); err != nil {
				dstDone <- sum{err: err}
				return
			}
		}
		dstDone <- v.checksum(ctx, v.db, r, true)
	}()
	src := v.checksum(ctx, conn, r, false)
	c.sumTime = src.took
	uerr := unlock()
	close(unlocked)
	dst := <-dstDone
	c.rows, c.same = src.n, src.equal(dst)
	return errors.Join(src.err, uerr, dst.err)
}

// sum is one side's checksum of a range.
type sum struct {
	n, sum int64
	took   time.Duration
	err    error
}

func (s sum) equal(o sum) bool { return s.err == nil && o.err == nil && s.n == o.n && s.sum == o.sum }

// catchUp waits until the target holds every change made before the source was locked, and with
// checksum, checksums the target's range then. The capture reads its position on a session of its
// own (the locked one is busy with the source's checksum), which shows the same moment: nothing
// can change the source while that session holds it read-locked. It waits as waitFor does.
func (v *verifier) catchUp(ctx context.Context, r table.Range, checksum bool, w wait) sum {
	posConn, err := v.db.Conn(ctx)
	if err != nil {
		return sum{err: err}
	}
	err = v.waitFor(ctx, posConn, w)
	posConn.Close()
	if err != nil {
		return sum{err: err}
	}
	if !checksum {
		return sum{}
	}
	return v.checksum(ctx, v.db, r, true)
}

// waitFor waits on conn until the target holds every change committed before the call, for
// w.limit: past it the target is behind (errBehind), or on w's last attempt verification fails.
// Past its deadline the wait counts as behind whatever the capture's error says (Galera's
// trigger sync does not wrap the deadline).
func (v *verifier) waitFor(ctx context.Context, conn *sql.Conn, w wait) error {
	waitCtx, cancel := context.WithTimeout(ctx, w.limit)
	defer cancel()
	err := v.target.WaitFor(waitCtx, conn)
	if dbconn.IsInterruptedWrite(err) {
		return fmt.Errorf("verify: %w", err)
	}
	if err != nil && !w.last && ctx.Err() == nil && waitCtx.Err() != nil {
		return errBehind
	}
	if err != nil {
		return fmt.Errorf("verify: the target did not catch up within %s: %w", w.limit, err)
	}
	return nil
}

// compareInSession compares with trigger capture, whose catch-up needs conn's locks: the target
// is checksummed in the same session, after the source (no other session can read a table conn
// holds WRITE-locked). Past w it returns errBehind, as catchUp does: a backlog of changes the
// capture has not synced yet (a rollback's first chunk, under writers, on a busy machine) is then
// synced with the source unlocked.
func (v *verifier) compareInSession(ctx context.Context, conn *sql.Conn, r table.Range, w wait) (comparison, error) {
	var c comparison
	if err := v.waitFor(ctx, conn, w); err != nil {
		return c, err
	}
	src := v.checksum(ctx, conn, r, false)
	if src.err != nil {
		return c, src.err
	}
	var dstQ dbconn.Querier = conn
	if v.cfg.TargetApart {
		dstQ = v.db
	}
	dst := v.checksum(ctx, dstQ, r, true)
	c.rows, c.same, c.sumTime = src.n, src.equal(dst), src.took+dst.took
	return c, dst.err
}

func (v *verifier) checksum(ctx context.Context, q dbconn.Querier, r table.Range, target bool) sum {
	var s sum
	query, args := v.q.Checksum(r, target)
	start := time.Now()
	if err := q.QueryRowContext(ctx, query, args...).Scan(&s.n, &s.sum); err != nil {
		s.err = fmt.Errorf("verify: checksum: %w", err)
	}
	s.took = time.Since(start)
	return s
}
