package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/table"
)

// Marker is the capture's side of a keyless table's copy (shadow/order.go, rule 5). Without a
// key a replayed change is not idempotent, so each one must land either in a chunk's read or in
// the replay, never both: a chunk is read in a session that holds the source READ-locked (no
// write can run meanwhile, nor hide as a concurrent insert), Mark reads there the capture's
// position that the read stands for, and the returned copied records the range as copied at it
// once the chunk is written (still inside the chunk's Order).
type Marker interface {
	// Marking: chunks must be marked (trigger capture's syncs need no positions).
	Marking() bool
	Mark(ctx context.Context, q *sql.Conn) (copied func(r table.Range), err error)
}

// keylessConfig is what a keyless copy allows: one chunk at a time, each read in a locked
// session of its own (copyMarked), so neither parallel chunks, staging nor client-side reads.
func keylessConfig(cfg Config) Config {
	cfg.Workers, cfg.AlwaysParallel, cfg.Stage, cfg.ClientSide = 0, false, StageNever, false
	return cfg
}

// copyMarked copies r of a keyless table under LOCK TABLES with the capture's position marked
// (Marker). The statement count per chunk (lock, mark, copy, unlock) costs a few round trips of
// lock time more than a keyed chunk.
func (c *Copier) copyMarked(ctx context.Context, r table.Range) (ch chunkCopy, err error) {
	if c.mark == nil {
		return ch, errors.New("a table without a unique key needs a capture that marks chunks (binlog capture)")
	}
	conn, err := c.writer.Conn(ctx)
	if err != nil {
		return ch, err
	}
	defer conn.Close()
	start := time.Now()
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+c.q.Source()+" READ, "+c.q.Target()+" WRITE"); err != nil {
		return ch, fmt.Errorf("lock for a keyless chunk: %w", err)
	}
	defer func() {
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); uerr != nil && err == nil {
			err = fmt.Errorf("unlock after a keyless chunk: %w", uerr)
		}
		ch.held = time.Since(start)
	}()
	copied, err := c.mark.Mark(ctx, conn)
	if err != nil {
		return ch, fmt.Errorf("mark the capture's position: %w", err)
	}
	query, args := c.q.CopyRange(r, c.cfg.Mode)
	res, err := conn.ExecContext(ctx, query, args...)
	if err != nil {
		return ch, err
	}
	ch.rows, _ = res.RowsAffected()
	copied(r)
	return ch, nil
}
