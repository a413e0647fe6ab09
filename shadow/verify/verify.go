// Package verify compares a source table and its target chunk by chunk at consistent points
// (MyISAM has no snapshots, so each source chunk is briefly read-locked while the target catches
// up), and recopies chunks that differ. It is the copy's second pass: same key, same Chunker.
package verify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Target is what verification needs from whatever keeps the target current (package shadow).
type Target interface {
	// WaitFor returns once the target holds every change committed before it was called; the
	// caller holds the source read-locked on conn, so nothing new arrives meanwhile.
	WaitFor(ctx context.Context, conn *sql.Conn) error
	// WaitUnlocked is WaitFor without the source locked: the capture takes what locks it needs.
	WaitUnlocked(ctx context.Context, conn *sql.Conn) error
	// Exclusive runs fn while no captured change is being written to the target.
	Exclusive(fn func() error) error
	// Hold runs fn while no captured change is being written to the target, without waiting for
	// anything else (an index build): the target then stays at the moment WaitFor reached.
	Hold(fn func() error) error
	// Mark, called on conn while it holds the source read-locked, stops the capture's writes to
	// the target at that moment (see Mark). A zero Mark: the capture cannot (trigger capture).
	Mark(ctx context.Context, conn *sql.Conn) (Mark, error)
}

// Mark is a target's capture stopped at the moment a chunk's lock of the source stands for:
// Reached returns once the target holds every change made before it, and the target stays there,
// whatever the application writes to the source meanwhile, until Lift.
type Mark struct {
	Reached func(ctx context.Context) error
	Lift    func()
}

// Config tunes verification.
type Config struct {
	// CatchUp bounds the wait for the target while the source is locked (default 1 s).
	CatchUp time.Duration
	Logger  *slog.Logger
	// Wait, when set, holds back each chunk before it locks anything.
	Wait copier.Waiter
	// Rows, when set, counts the rows compared so far (progress).
	Rows *atomic.Int64
	// LockWith is what the target's capture needs locked with the source to catch up (trigger
	// capture: the target and its change log). The target is then checksummed in the same
	// session, after the source: no other session can read a table this one holds WRITE-locked.
	LockWith []string
	// TargetApart says the target is not among LockWith (trigger capture on a Galera node locks
	// only the log with the source, and writes the target through other sessions): it is then
	// checksummed in a session of its own, still while the source is locked.
	TargetApart bool
	// NoRepair: a range that differs fails verification at once instead of being recopied. On a
	// Galera node a recopy writes the InnoDB target while its session holds LOCK TABLES on it,
	// and a DDL on either table ordered in total order meanwhile would wait for that lock while
	// the recopy's commit waits for the DDL: a wedged node. Failing leaves the original as it is.
	NoRepair bool
	// Sample, when set, makes Run a sample of verification's cost (the whole run's ETA: package
	// migration): it stops before a step that would take it past Sample.Rows rows compared, once
	// Sample.Budget has elapsed, and before the step that reads to the end of the table.
	Sample *Sample
}

// Sample bounds a sample (Config.Sample).
type Sample struct {
	Rows   int64
	Budget time.Duration
}

// over reports whether a sample that began at start and compared res stops before s.
func (sm *Sample) over(s copier.Step, res Result, start time.Time) bool {
	return sm != nil && (s.Last() || res.Rows+int64(s.Size) > sm.Rows || time.Since(start) >= sm.Budget)
}

// errSampled ends a sample's walk.
var errSampled = errors.New("sampled")

// Result counts what verification saw.
type Result struct {
	Chunks   int           `json:"chunks"`
	Rows     int64         `json:"rows"`
	Repaired int           `json:"repaired_chunks"`
	LockTime time.Duration `json:"lock_ns"`
	// LockWait is the time spent taking the chunks' locks (waiting for a moment no application
	// transaction holds the table, or for writers queued ahead); AfterRelease the time chunks
	// spent on the target after letting the source go (its catch-up to the mark and checksum).
	// What Duration holds beyond these and LockTime is mostly the pace's rests.
	LockWait     time.Duration `json:"lock_wait_ns"`
	AfterRelease time.Duration `json:"after_release_ns"`
	// Rests is the rests the chunks owed the application (the pace's; they run from each
	// chunk's unlock, beside its work on the target).
	Rests    time.Duration `json:"rests_ns"`
	Duration time.Duration `json:"duration_ns"`
	// BehindRetries counts the times a chunk let the source go because the target was behind
	// (patience), to be compared again once it had caught up.
	BehindRetries int `json:"behind_retries"`
}

// ErrMismatch means a chunk still differed after being recopied.
var ErrMismatch = errors.New("source and target differ")

// maxRepairs bounds how often one chunk is recopied before verification gives up.
const maxRepairs = 3

// errBehind: the target had not caught up when the chunk's patience ran out; the source is let go.
var errBehind = errors.New("the target is behind")

// While the source is locked, the application's writers wait, and the target's catch-up can stall
// for a reason of its own: replay waits for the target's metadata lock while the index build beside
// verification finishes, or for a lock another session holds on the target. So a chunk waits for
// the target under the lock for at most twice its lock-time goal (never less than MinPatience) and
// never over Config.CatchUp; past that, it lets the source go, waits for the target unlocked (up to
// behindWait), and compares again. After maxBehind such retries it waits under the lock for up to
// Config.CatchUp, still letting the source go past it, maxLate times; the last of them fails
// verification, so a replay that is merely slow cannot keep one chunk from ever being compared
// (TestVerifyLetsTheSourceGoWhileTheShadowIsBehind holds replay still and measures the
// application's writes). One such wait is too few: under trigger capture a chunk's lock waits for a
// gap in the application's transactions while their notes pile up, so the backlog it finds can
// outlast one (docs/how-it-works/verification.md, "Patience with a shadow that is behind";
// TestVerifyGivesTheTargetMoreThanOneLateChance).
const (
	MinPatience = 20 * time.Millisecond
	maxBehind   = 3
	maxLate     = 3
	behindWait  = time.Minute
)

// patience is how long a chunk aiming at goal waits under the lock for the target.
func patience(goal time.Duration) time.Duration { return max(2*goal, MinPatience) }

// wait is one attempt's wait for the target under the source's lock: for limit, past which the
// target is behind (errBehind) or, on the last attempt, verification fails.
type wait struct {
	limit time.Duration
	last  bool
}

// waitAfter is the wait of a chunk aiming at goal after behind attempts found the target behind.
func (v *verifier) waitAfter(goal time.Duration, behind int) wait {
	if behind < maxBehind {
		return wait{limit: min(patience(goal), v.cfg.CatchUp)}
	}
	return wait{limit: v.cfg.CatchUp, last: behind >= maxBehind+maxLate-1}
}

type verifier struct {
	db     *sql.DB
	locker *mdl.Locker // takes the chunks' locks (mdl.VerifyChunk)
	q      *table.SQL
	target Target
	cfg    Config
}

// Run verifies q's source against its target, walking the key with chunks. db is a control pool
// (it needs 3 connections).
func Run(ctx context.Context, db *sql.DB, q *table.SQL, chunks *copier.Chunker, target Target, cfg Config) (Result, error) {
	if cfg.CatchUp <= 0 {
		cfg.CatchUp = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = dbconn.Logger(nil)
	}
	_, name := q.SourceTable()
	locker, err := mdl.New(ctx, db, name, q.Target())
	if err != nil {
		return Result{}, err
	}
	locker.Waiting = locker.ReportEvery(cfg.Logger, "verify", mdl.ReportAfter)
	v := &verifier{db: db, locker: locker, q: q, target: target, cfg: cfg}
	start := time.Now()
	var res Result
	var visitErr error
	err = chunks.Walk(ctx, nil, func(ctx context.Context, s copier.Step, release func(took, held time.Duration)) (time.Time, error) {
		if cfg.Sample.over(s, res, start) {
			visitErr = errSampled
			return time.Time{}, errSampled
		}
		if cfg.Wait != nil {
			if err := cfg.Wait.Wait(ctx); err != nil {
				visitErr = err
				return time.Time{}, err
			}
		}
		c, err := v.chunk(ctx, s, release)
		if visitErr = err; err != nil {
			return time.Time{}, err
		}
		res.add(c, v.cfg.Rows)
		// The rest runs from the unlock: a target checksummed after it was part of the rest.
		return c.unlocked, nil
	})
	if err != nil && err != visitErr {
		return res, fmt.Errorf("verify: %w", err) // planning a step or resting failed
	}
	res.Duration, res.Rests = time.Since(start), chunks.Stats().Rest
	if errors.Is(err, errSampled) {
		err = nil
	}
	return res, err
}

// releaseEarly reports whether s's chunk lets the source's lock go before the target is compared
// (see compare): while other clients wait for the table, and on every chunk where the target can
// Mark (compareMarked). A test may force early release on every chunk or on none
// (Faults.VerifyRelease); none keeps the source locked until both sides are compared.
func releaseEarly(ctx context.Context, s copier.Step) bool {
	switch faultsOf(ctx).VerifyRelease() {
	case forceAlways:
		return true
	case forceNever:
		return false
	}
	return s.Contended
}

func (r *Result) add(c comparison, rows *atomic.Int64) {
	r.Chunks++
	r.Rows += c.rows
	if rows != nil {
		rows.Add(c.rows)
	}
	r.LockTime += c.held
	r.LockWait += c.waited
	r.AfterRelease += c.after
	r.BehindRetries += c.behind
	if c.repaired {
		r.Repaired++
	}
}

// comparison is what verifying one range took.
type comparison struct {
	rows     int64
	same     bool
	repaired bool          // the range was recopied (chunk)
	behind   int           // the source was let go this often because the target was behind
	sumTime  time.Duration // the checksums' time (the source's alone when released early)
	held     time.Duration // the source was locked
	waited   time.Duration // taking the source's lock
	after    time.Duration // from the source's last unlock to the comparison's end
	unlocked time.Time     // the source was last unlocked
}

// chunk verifies s's key range, recopying it while it differs, and comparing it again when the
// target was behind. It releases the walk when the source is first unlocked, sized by the
// checksum time only (the source's when its lock is released early): the lock and catch-up cost
// per chunk is fixed, so counting it would shrink chunks toward that overhead and make
// verification crawl.
func (v *verifier) chunk(ctx context.Context, s copier.Step, release func(took, held time.Duration)) (comparison, error) {
	r, early := s.Range, releaseEarly(ctx, s)
	released := func(c comparison) { release(c.sumTime, c.held) }
	var held, waited, after time.Duration
	behind := 0
	for attempt := 0; ; {
		w := v.waitAfter(s.Target, behind)
		c, err := v.compare(ctx, r, early, w, released)
		released = nil
		held, waited, after = held+c.held, waited+c.waited, after+c.after
		c.held, c.waited, c.after, c.repaired, c.behind = held, waited, after, attempt > 0, behind
		if errors.Is(err, errBehind) {
			behind++
			v.cfg.Logger.Debug("verify: the target is behind; the source is let go until it catches up",
				"from", fmt.Sprint(r.Lo), "to", fmt.Sprint(r.Hi), "patience", w.limit)
			if err := v.waitUnlocked(ctx); err != nil {
				return c, err
			}
			continue
		}
		if err != nil || c.same {
			return c, err
		}
		if v.cfg.NoRepair {
			return c, fmt.Errorf("%w in key range %v..%v (not recopied on a Galera node)", ErrMismatch, r.Lo, r.Hi)
		}
		if attempt == maxRepairs {
			return c, fmt.Errorf("%w in key range %v..%v after %d recopies", ErrMismatch, r.Lo, r.Hi, maxRepairs)
		}
		v.cfg.Logger.Warn("verify: key range differs; recopying it", "from", fmt.Sprint(r.Lo), "to", fmt.Sprint(r.Hi))
		h, err := v.repair(ctx, r)
		held += h
		if err != nil {
			return comparison{held: held, waited: waited, after: after, repaired: true, behind: behind, unlocked: time.Now()}, err
		}
		attempt++
	}
}

// waitUnlocked waits, without holding the source, until the target holds every change committed
// before the call.
func (v *verifier) waitUnlocked(ctx context.Context) error {
	conn, err := v.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	waitCtx, cancel := context.WithTimeout(ctx, behindWait)
	defer cancel()
	if err := v.target.WaitUnlocked(waitCtx, conn); err != nil {
		return fmt.Errorf("verify: the target did not catch up within %s, with the source unlocked: %w", behindWait, err)
	}
	return nil
}
