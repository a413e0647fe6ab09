package copier

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/dbconn"
	"golang.org/x/sync/errgroup"
)

// maxWriteBytes bounds one multi-row write so it stays well under max_allowed_packet.
const maxWriteBytes = 4 << 20

type chunk struct {
	rows  [][]any
	hi    []any // key of the last row
	bytes int
	end   func() // ends the chunk's Order once written
}

// runClientSide reads each chunk into enginemig and writes it back, reading the next chunk while
// the previous one is written. Each chunk's Order spans its read and its write, across the two
// goroutines (Order tokens are not tied to a goroutine).
func (c *Copier) runClientSide(ctx context.Context, lo []any) error {
	g, ctx := errgroup.WithContext(ctx)
	chunks := make(chan chunk, 1)
	g.Go(func() error {
		defer close(chunks)
		return c.readLoop(ctx, lo, chunks)
	})
	g.Go(func() error {
		var err error
		for ch := range chunks {
			if err == nil {
				err = c.write(ctx, ch)
			}
			ch.end()
		}
		return err
	})
	return g.Wait()
}

func (c *Copier) readLoop(ctx context.Context, lo []any, out chan<- chunk) error {
	var stmts [2]*sql.Stmt
	defer func() {
		for _, st := range stmts {
			if st != nil {
				st.Close()
			}
		}
	}()
	for {
		if err := c.throttle(ctx); err != nil {
			return err
		}
		i := 0
		if lo != nil {
			i = 1
		}
		query, args := c.q.ReadRows(lo)
		if stmts[i] == nil {
			st, err := c.reader.PrepareContext(ctx, query)
			if err != nil {
				return fmt.Errorf("copy: prepare read: %w", err)
			}
			stmts[i] = st
		}
		target := c.chunks.Target(ctx)
		limit := int(c.chunks.Size())
		end := c.order.BeginChunk()
		start := time.Now()
		ch, err := c.read(ctx, stmts[i], append(args, limit), limit)
		took := time.Since(start)
		if err != nil {
			end()
			return fmt.Errorf("copy: read chunk after %v: %w", lo, err)
		}
		c.lockTime.Add(int64(took))
		c.chunks.Took(len(ch.rows), limit, took, target)
		if len(ch.rows) == 0 {
			c.written(nil, 0) // end of table, marked while the chunk's Order is held
			end()
			return nil
		}
		ch.end = end
		select {
		case out <- ch:
		case <-ctx.Done():
			end()
			return ctx.Err()
		}
		lo = ch.hi
	}
}

func (c *Copier) read(ctx context.Context, st *sql.Stmt, args []any, limit int) (chunk, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return chunk{}, err
	}
	defer rows.Close()
	ch := chunk{rows: make([][]any, 0, limit)}
	for rows.Next() {
		vals, err := dbconn.ScanValues(rows, c.q.Columns())
		if err != nil {
			return ch, err
		}
		for _, v := range vals {
			if b, ok := v.([]byte); ok {
				ch.bytes += len(b)
			} else {
				ch.bytes += 8
			}
		}
		ch.rows = append(ch.rows, vals)
	}
	if n := len(ch.rows); n > 0 {
		for _, p := range c.q.KeyPositions() {
			ch.hi = append(ch.hi, ch.rows[n-1][p])
		}
	}
	return ch, rows.Err()
}

func (c *Copier) write(ctx context.Context, ch chunk) error {
	tx, err := c.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("copy: begin: %w", err)
	}
	defer tx.Rollback()
	perRow := ch.bytes/len(ch.rows) + 16*c.q.Columns()
	step := max(1, min(len(ch.rows), maxWriteBytes/perRow))
	for start := 0; start < len(ch.rows); start += step {
		end := min(start+step, len(ch.rows))
		args := make([]any, 0, (end-start)*c.q.Columns())
		for _, r := range ch.rows[start:end] {
			args = append(args, r...)
		}
		if _, err := tx.ExecContext(ctx, c.q.WriteRows(end-start, c.cfg.Mode), args...); err != nil {
			return fmt.Errorf("copy: write %d rows to %s: %w", end-start, c.q.Target(), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("copy: commit: %w", err)
	}
	c.written(ch.hi, int64(len(ch.rows)))
	return nil
}
