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

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/table"
)

// Target is what verification needs from whatever keeps the target current (package shadow).
type Target interface {
	// WaitFor returns once the target holds every change committed before it was called; the
	// caller holds the source read-locked on conn, so nothing new arrives meanwhile.
	WaitFor(ctx context.Context, conn *sql.Conn) (binlog.Position, error)
	// Exclusive runs fn while no captured change is being written to the target.
	Exclusive(fn func() error) error
}

// Config tunes verification.
type Config struct {
	// CatchUp bounds the wait for the target while the source is locked (default 1 s).
	CatchUp time.Duration
	Logger  *slog.Logger
	// Rows, when set, counts the rows compared so far (progress).
	Rows *atomic.Int64
	// LockWith is what the target's capture needs locked with the source to catch up (trigger
	// capture: the target and its change log). The target is then checksummed in the same
	// session, after the source: no other session can read a table this one holds WRITE-locked.
	LockWith []string
}

// Result counts what verification saw.
type Result struct {
	Chunks   int           `json:"chunks"`
	Rows     int64         `json:"rows"`
	Repaired int           `json:"repaired_chunks"`
	LockTime time.Duration `json:"lock_ns"`
	Duration time.Duration `json:"duration_ns"`
}

// ErrMismatch means a chunk still differed after being recopied.
var ErrMismatch = errors.New("source and target differ")

// maxRepairs bounds how often one chunk is recopied before verification gives up.
const maxRepairs = 3

type verifier struct {
	db     *sql.DB
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
	v := &verifier{db: db, q: q, target: target, cfg: cfg}
	start := time.Now()
	var res Result
	var lo []any
	for {
		goal := chunks.Target(ctx)
		hi, size, err := chunks.Next(ctx, lo)
		if err != nil {
			return res, fmt.Errorf("verify: %w", err)
		}
		rows, repaired, took, held, err := v.chunk(ctx, table.Range{Lo: lo, Hi: hi})
		if err != nil {
			return res, err
		}
		res.Chunks++
		res.Rows += rows
		if v.cfg.Rows != nil {
			v.cfg.Rows.Add(rows)
		}
		res.LockTime += held
		if repaired {
			res.Repaired++
		}
		if hi == nil {
			res.Duration = time.Since(start)
			return res, nil
		}
		// Sized by the checksum time only: the lock and catch-up cost per chunk is fixed, so
		// counting it would shrink chunks toward that overhead and make verification crawl.
		if !repaired {
			chunks.Took(size, size, took, goal)
		}
		if err := chunks.Rest(ctx, held); err != nil {
			return res, err
		}
		lo = hi
	}
}

// chunk verifies one key range, recopying it while it differs. It returns the rows compared,
// whether it recopied, the checksum time of the last comparison and the total lock hold time.
func (v *verifier) chunk(ctx context.Context, r table.Range) (int64, bool, time.Duration, time.Duration, error) {
	var held time.Duration
	for attempt := 0; ; attempt++ {
		n, same, sumTime, h, err := v.compare(ctx, r)
		held += h
		if err != nil || same {
			return n, attempt > 0, sumTime, held, err
		}
		if attempt == maxRepairs {
			return 0, true, 0, held, fmt.Errorf("%w in key range %v..%v after %d recopies", ErrMismatch, r.Lo, r.Hi, maxRepairs)
		}
		v.cfg.Logger.Warn("verify: key range differs; recopying it", "from", fmt.Sprint(r.Lo), "to", fmt.Sprint(r.Hi))
		h, err = v.repair(ctx, r)
		held += h
		if err != nil {
			return 0, true, 0, held, err
		}
	}
}

// compare checksums the range in source and target at one consistent point: the source is
// read-locked (MyISAM has no snapshots), and the target is given time to catch up with every
// change made before the lock, so both sides show the same moment.
func (v *verifier) compare(ctx context.Context, r table.Range) (n int64, same bool, sumTime, held time.Duration, err error) {
	conn, err := v.db.Conn(ctx)
	if err != nil {
		return 0, false, 0, 0, err
	}
	defer conn.Close()
	// The second, aliased lock changes nothing but the statement's shape: plan's lock-tables check
	// tells enginemig's own LOCK TABLES from the application's by it.
	lock := "LOCK TABLES " + v.q.Source() + " READ, " + v.q.Source() + " AS `_enginemig_verify` READ"
	for _, l := range v.cfg.LockWith {
		lock += ", " + l
	}
	if _, err := conn.ExecContext(ctx, lock); err != nil {
		return 0, false, 0, 0, fmt.Errorf("verify: lock %s: %w", v.q.Source(), err)
	}
	locked := time.Now()
	defer func() {
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); uerr != nil && err == nil {
			err = fmt.Errorf("verify: unlock: %w", uerr)
		}
		held = time.Since(locked)
	}()
	waitCtx, cancel := context.WithTimeout(ctx, v.cfg.CatchUp)
	_, err = v.target.WaitFor(waitCtx, conn)
	cancel()
	if err != nil {
		return 0, false, 0, 0, fmt.Errorf("verify: the target did not catch up within %s: %w", v.cfg.CatchUp, err)
	}
	t0 := time.Now()
	if len(v.cfg.LockWith) > 0 {
		srcN, srcSum, err := v.checksum(ctx, conn, r, false)
		if err != nil {
			return 0, false, 0, 0, err
		}
		dstN, dstSum, err := v.checksum(ctx, conn, r, true)
		return srcN, err == nil && srcN == dstN && srcSum == dstSum, time.Since(t0), 0, err
	}
	// Both sides at once: the target is stable too (it has nothing left to apply).
	type sum struct {
		n, sum int64
		err    error
	}
	dstDone := make(chan sum, 1)
	go func() {
		n, s, err := v.checksum(ctx, v.db, r, true)
		dstDone <- sum{n, s, err}
	}()
	srcN, srcSum, err := v.checksum(ctx, conn, r, false)
	dst := <-dstDone
	if err = errors.Join(err, dst.err); err != nil {
		return 0, false, 0, 0, err
	}
	return srcN, srcN == dst.n && srcSum == dst.sum, time.Since(t0), 0, nil
}

// repair recopies the range in one locked session, with no captured change being written to the
// target meanwhile (Exclusive). It cannot run beside compare's READ lock from another connection:
// MyISAM queues a new read behind waiting writers, which wait for that lock. LOCK TABLES must name
// the target and the source's alias too (every table a locked session touches must be locked).
func (v *verifier) repair(ctx context.Context, r table.Range) (held time.Duration, err error) {
	err = v.target.Exclusive(func() error {
		held, err = v.recopy(ctx, r)
		return err
	})
	return held, err
}

func (v *verifier) recopy(ctx context.Context, r table.Range) (held time.Duration, err error) {
	conn, err := v.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	src, dst := v.q.Source(), v.q.Target()
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+src+" READ, "+src+" AS s READ, "+dst+" WRITE"); err != nil {
		return 0, fmt.Errorf("verify: lock for recopy: %w", err)
	}
	locked := time.Now()
	defer func() {
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); uerr != nil && err == nil {
			err = fmt.Errorf("verify: unlock: %w", uerr)
		}
		held = time.Since(locked)
	}()
	query, args := v.q.CopyRange(r, table.Replace)
	if _, err := conn.ExecContext(ctx, query, args...); err != nil {
		return 0, fmt.Errorf("verify: recopy: %w", err)
	}
	query, args = v.q.DeleteMissing(r)
	if _, err := conn.ExecContext(ctx, query, args...); err != nil {
		return 0, fmt.Errorf("verify: remove rows missing from the source: %w", err)
	}
	return 0, nil
}

func (v *verifier) checksum(ctx context.Context, q dbconn.Querier, r table.Range, target bool) (int64, int64, error) {
	var n, sum int64
	query, args := v.q.Checksum(r, target)
	if err := q.QueryRowContext(ctx, query, args...).Scan(&n, &sum); err != nil {
		return 0, 0, fmt.Errorf("verify: checksum: %w", err)
	}
	return n, sum, nil
}
