package copier

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// maxWriteBytes bounds one multi-row write so it stays well under max_allowed_packet.
const maxWriteBytes = 4 << 20

type chunk struct {
	rows  [][]any
	hi    []any // the end of the chunk's range (nil: the end of the table)
	bytes int
	end   func() // ends the chunk's Order once written
}

// runClientSide reads each chunk into enginemig and writes it back, reading the next chunk while
// the previous one is written. Each chunk's Order spans its read and its write, across the two
// goroutines (Order tokens are not tied to a goroutine). The reads walk the key like the
// server-side copy's chunks (Chunker.Walk): sized by the read, which is all that holds the
// source, and resting after it while other clients wait for the table.
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

// readLoop reads the chunks after lo and hands them to the writer. The rest a read owes starts
// once its chunk is handed over: waiting for the writer to take it is not rest, the writer takes
// the CPU and I/O the application needs.
func (c *Copier) readLoop(ctx context.Context, lo []any, out chan<- chunk) error {
	var stmts readStmts
	defer stmts.close()
	var visitErr error
	err := c.chunks.Walk(ctx, lo, func(ctx context.Context, s Step, release func(took, held time.Duration)) (time.Time, error) {
		visitErr = c.readStep(ctx, &stmts, s, release, out)
		return time.Time{}, visitErr
	})
	if err != nil && err != visitErr {
		return fmt.Errorf("copy: %w", err) // planning a step or resting failed
	}
	return err
}

// readStep reads s's rows under a chunk's Order and hands them to the writer.
func (c *Copier) readStep(ctx context.Context, stmts *readStmts, s Step, release func(took, held time.Duration), out chan<- chunk) error {
	if err := c.throttle(ctx); err != nil {
		return err
	}
	st, err := stmts.get(ctx, c.reader, c.q, s.Range)
	if err != nil {
		return fmt.Errorf("copy: prepare read: %w", err)
	}
	end := c.order.BeginChunk()
	start := time.Now()
	ch, err := c.read(ctx, st, s)
	took := time.Since(start)
	if err != nil {
		end()
		return fmt.Errorf("copy: read chunk after %v: %w", s.Lo, err)
	}
	c.lockTime.Add(int64(took))
	release(took, took)
	ch.end = end
	select {
	case out <- ch:
		return nil
	case <-ctx.Done():
		end()
		return ctx.Err()
	}
}

// readStmts are the prepared reads of the four shapes of range (either end open or not).
type readStmts [4]*sql.Stmt

func (r *readStmts) get(ctx context.Context, db *sql.DB, q *table.SQL, rg table.Range) (*sql.Stmt, error) {
	i := 0
	if rg.Lo != nil {
		i++
	}
	if rg.Hi != nil {
		i += 2
	}
	if r[i] == nil {
		query, _ := q.ReadRange(rg)
		st, err := db.PrepareContext(ctx, query)
		if err != nil {
			return nil, err
		}
		r[i] = st
	}
	return r[i], nil
}

func (r *readStmts) close() {
	for _, st := range r {
		if st != nil {
			st.Close()
		}
	}
}

func (c *Copier) read(ctx context.Context, st *sql.Stmt, s Step) (chunk, error) {
	_, args := c.q.ReadRange(s.Range)
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return chunk{}, err
	}
	defer rows.Close()
	ch := chunk{rows: make([][]any, 0, s.Size), hi: s.Hi}
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
	return ch, rows.Err()
}

// write writes ch's rows to the target in one transaction and records the chunk as written (the
// last one, which may be empty, marks the copy complete).
func (c *Copier) write(ctx context.Context, ch chunk) error {
	if len(ch.rows) == 0 {
		c.written(ch.hi, 0)
		return nil
	}
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
