package copier

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// A staged chunk holds the source only while its rows are read into a temporary MyISAM table
// (table.SQL.StageFill), then writes them into the target from there, with the source free.
// Staging holds the source about a third as long in all, and makes the copy a little slower
// (docs/bench/constants.md). So chunks are staged only while other clients wait for the table:
// then the lock is what they feel, and the copy rests in proportion to it. The chunk's Order spans
// both statements, like a client-side chunk's read and write.
//
// The stage belongs to one session, so staged chunks run on one connection held for the copy.
// Without the CREATE TEMPORARY TABLES privilege the copy stays direct (logged once).

// staging reports whether a chunk goes through the stage: while other clients wait for the table
// (contended), unless a test forces the choice (Faults.CopyStage), and never for a keyless
// table, whose chunks each hold the source in a session of their own (keylessConfig).
func (c *Copier) staging(ctx context.Context, contended bool) bool {
	if c.q.Keyless() {
		return false
	}
	switch faultsOf(ctx).CopyStage() {
	case forceAlways:
		return true
	case forceNever:
		return false
	}
	return contended
}

// copyStaged copies r through the stage; ok is false when there is no stage (copy directly).
func (c *Copier) copyStaged(ctx context.Context, r table.Range, released func(held time.Duration)) (ch chunkCopy, ok bool, err error) {
	conn := c.stageConn(ctx)
	if conn == nil {
		return ch, false, nil
	}
	query, args := c.q.StageFill(r)
	start := time.Now()
	res, err := dbconn.ExecWhole(ctx, conn, c.q.Stage(), query, args...) // the stage is MyISAM
	ch.held, ch.staged = time.Since(start), true
	if err != nil {
		return ch, true, fmt.Errorf("read into the stage: %w", err)
	}
	ch.rows, _ = res.RowsAffected()
	released(ch.held)
	if _, err := conn.ExecContext(ctx, c.q.StageDrain(c.cfg.Mode)); err != nil {
		return ch, true, fmt.Errorf("write from the stage: %w", err)
	}
	if _, err := dbconn.ExecWhole(ctx, conn, c.q.Stage(), c.q.StageClear()); err != nil {
		return ch, true, fmt.Errorf("empty the stage: %w", err)
	}
	c.staged.Add(1)
	return ch, true, nil
}

// stageConn is the session holding the stage, created at the first staged chunk; nil when it
// cannot be created.
func (c *Copier) stageConn(ctx context.Context) *sql.Conn {
	if c.stage != nil || c.noStage {
		return c.stage
	}
	conn, err := c.writer.Conn(ctx)
	if err == nil {
		if _, err = conn.ExecContext(ctx, c.q.StageCreate()); err != nil {
			conn.Close()
		}
	}
	if err != nil {
		c.noStage = true
		if c.cfg.Logger != nil {
			c.cfg.Logger.Warn("copy: no temporary stage table; contended chunks hold the table while they write too (grant CREATE TEMPORARY TABLES to stage them)", "error", err)
		}
		return nil
	}
	c.stage = conn
	return conn
}

func (c *Copier) closeStage() {
	if c.stage == nil {
		return
	}
	c.stage.ExecContext(context.Background(), c.q.StageDrop())
	c.stage.Close()
	c.stage = nil
}
