package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
)

// The locks a chunk takes, and the recopy of a range that differs.

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
	if err := v.locker.Take(ctx, conn, mdl.VerifyChunk, "LOCK TABLES "+src+" READ, "+src+" AS s READ, "+dst+" WRITE"); err != nil {
		return 0, fmt.Errorf("verify: lock for recopy: %w", err)
	}
	locked := time.Now()
	defer func() {
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); uerr != nil && err == nil {
			err = fmt.Errorf("verify: unlock: %w", uerr)
		}
		held = time.Since(locked)
	}()
	for _, st := range v.q.Recopy(r) {
		// A chunk's rows at most, never interrupted: in a rollback dst is MyISAM (dbconn.ExecWhole).
		if _, err := dbconn.ExecWhole(ctx, conn, dst, st.SQL, st.Args...); err != nil {
			return 0, fmt.Errorf("verify: recopy: %w", err)
		}
	}
	return 0, nil
}
