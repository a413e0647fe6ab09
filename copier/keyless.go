package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Marker is the capture's side of a keyless table's copy (shadow/order.go, rule 5). Without a
// key a replayed change is not idempotent, so each one must land either in a chunk's read or in
// the replay, never both: a chunk is read in a session that holds the source READ-locked (no
// write can run meanwhile, nor hide as a concurrent insert), Mark reads there the capture's
// position that the read stands for, and the returned copied records the range as copied at it
// once the chunk is written (still inside the chunk's Order, which may outlast the lock:
// copyMarkedApart).
type Marker interface {
	// Marking: chunks must be marked (trigger capture's syncs need no positions).
	Marking() bool
	Mark(ctx context.Context, q *sql.Conn) (copied func(r table.Range), err error)
}

// keylessConfig is what a keyless copy allows: one chunk at a time, each read in a locked
// session of its own (copyMarked), so neither parallel chunks, staging (staging) nor client-side
// reads.
func keylessConfig(cfg Config) Config {
	cfg.Workers, cfg.ClientSide = 0, false
	return cfg
}

// copyMarked copies r of a keyless table under LOCK TABLES with the capture's position marked
// (Marker). The statement count per chunk (lock, mark, copy, unlock) costs a few round trips of
// lock time more than a keyed chunk.
func (c *Copier) copyMarked(ctx context.Context, r table.Range) (ch chunkCopy, err error) {
	conn, err := c.writer.Conn(ctx)
	if err != nil {
		return ch, err
	}
	defer conn.Close()
	query, args := c.q.CopyRange(r, c.cfg.Mode)
	copied, res, held, err := c.underMark(ctx, conn, c.q.Source()+" READ, "+c.q.Target()+" WRITE", c.q.Target(), query, args)
	ch.held = held
	if err != nil {
		return ch, err
	}
	ch.rows, _ = res.RowsAffected()
	copied(r)
	return ch, nil
}

// underMark runs query, which writes the table written, on conn while conn holds lock (LOCK
// TABLES lock), with the capture's position marked there first, and unlocks. The query runs to
// its end (dbconn.ExecWhole): it may write the MyISAM stage. held is how long the tables were locked; copied
// records the chunk's range as copied at the mark.
func (c *Copier) underMark(ctx context.Context, conn *sql.Conn, lock, written, query string, args []any) (copied func(table.Range), res sql.Result, held time.Duration, err error) {
	locker, err := c.locker(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	start := time.Now()
	if err := locker.Take(ctx, conn, mdl.CopyChunk, "LOCK TABLES "+lock); err != nil {
		return nil, nil, 0, fmt.Errorf("lock for a keyless chunk: %w", err)
	}
	defer func() {
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); uerr != nil && err == nil {
			err = fmt.Errorf("unlock after a keyless chunk: %w", uerr)
		}
		held = time.Since(start)
	}()
	if copied, err = c.mark.Mark(ctx, conn); err != nil {
		return nil, nil, 0, fmt.Errorf("mark the capture's position: %w", err)
	}
	if f := faultsOf(ctx).ChunkLocked(); f != nil {
		f()
	}
	if res, err = dbconn.ExecWhole(ctx, conn, written, query, args...); err != nil {
		return nil, nil, 0, fmt.Errorf("keyless chunk: %w", err)
	}
	return copied, res, 0, nil
}

// copyMarkedApart copies r of a keyless table on a Galera node. There every commit of the node
// ordered after a DDL in total-order isolation waits for that DDL, and the DDL waits for sessions
// holding tables with LOCK TABLES: a chunk that wrote the target while its session held the source
// and the target locked wedged the node when a DDL was ordered meanwhile (even one on another
// table; docs/how-it-works/galera.md, "The rule on Galera"). So the chunk's session holds only the
// source (READ; MyISAM, nothing of it commits through the cluster) while it marks the capture's
// position and reads the rows into its stage (a temporary MyISAM table, which the cluster does not
// see), lets the source go, and then writes the stage into the target. Its caller holds the chunk's
// Order throughout, so no replayed change reaches the range between the read and the write, and the
// range is recorded as copied only once its rows are in (shadow/order.go, rules 1 and 5). The write
// is one statement the cluster may abort (a DDL on the target took its table): it is run again
// whole.
func (c *Copier) copyMarkedApart(ctx context.Context, r table.Range, released func(held time.Duration)) (ch chunkCopy, err error) {
	conn := c.stageConn(ctx)
	if conn == nil {
		return ch, errors.New("on a Galera node a table without a key is copied through a temporary table: grant the account CREATE TEMPORARY TABLES on the table's schema")
	}
	query, args := c.q.StageFill(r)
	copied, _, held, err := c.underMark(ctx, conn, c.q.Source()+" READ", c.q.Stage(), query, args)
	ch.held, ch.staged = held, true
	if err != nil {
		return ch, err
	}
	released(held)
	var res sql.Result
	err = dbconn.RetryClusterAborts(ctx, func() (err error) {
		res, err = conn.ExecContext(ctx, c.q.StageDrain(c.cfg.Mode))
		return err
	})
	if err != nil {
		return ch, fmt.Errorf("write a keyless chunk from the stage: %w", err)
	}
	ch.rows, _ = res.RowsAffected()
	if _, err := dbconn.ExecWhole(ctx, conn, c.q.Stage(), c.q.StageClear()); err != nil {
		return ch, fmt.Errorf("empty the stage: %w", err)
	}
	c.staged.Add(1)
	copied(r)
	return ch, nil
}

// locker is the keyless chunks' mdl.Locker (mdl.CopyChunk), made at the first chunk.
func (c *Copier) locker(ctx context.Context) (*mdl.Locker, error) {
	c.lockerOnce.Do(func() {
		_, name := c.q.SourceTable()
		c.lockerVal, c.lockerErr = mdl.New(ctx, c.writer, name, c.q.Target())
		if c.lockerErr == nil && c.cfg.Logger != nil {
			c.lockerVal.Waiting = c.lockerVal.ReportEvery(c.cfg.Logger, "copy", mdl.ReportAfter)
		}
	})
	return c.lockerVal, c.lockerErr
}
