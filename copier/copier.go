// Package copier copies a MyISAM table's rows into its shadow in key order, in chunks sized so
// that each source read (which holds MyISAM's table lock) stays short, writing outside that lock.
package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/table"
	"github.com/enginemig/enginemig/throttle"
)

// Tuning defaults. A MyISAM SELECT holds a table READ lock for its whole run and every writer
// queues behind it, so the read time per chunk is what the application feels; 10–20 ms is short
// against typical web-request budgets yet long enough to amortise the per-statement overhead
// (DESIGN.md: per-statement costs dominate below a few thousand rows).
const (
	DefaultChunkTime = 15 * time.Millisecond
	initialChunk     = 1000
	minChunk         = 50
	maxChunk         = 200000
	// maxWriteBytes bounds one multi-row REPLACE so it stays well under max_allowed_packet.
	maxWriteBytes = 4 << 20
)

// Config tunes the copy.
type Config struct {
	// ChunkTime is the target duration of one chunk's hold on the source lock while other
	// clients wait for the table.
	ChunkTime time.Duration
	// IdleChunkTime is the target while no client waits (see DefaultIdleChunkTime); set it equal
	// to ChunkTime to keep chunks short regardless.
	IdleChunkTime time.Duration
	// Throttle, when set, is called before each chunk and may wait (e.g. while the server is busy).
	Throttle func(ctx context.Context) error
	// RestRatio: pause after a contended chunk for this multiple of its duration (default
	// DefaultRestRatio; negative: never pause).
	RestRatio float64
	// ClientSide reads rows into enginemig and writes them back instead of one REPLACE ... SELECT
	// per chunk: the source lock is then held only for the read, at a much higher total cost.
	ClientSide bool
}

// Copier copies one table.
type Copier struct {
	reader, writer *sql.DB
	ti             *table.Info
	shadow         string
	cfg            Config
	gate           *sync.RWMutex
	keyCols        []string
	keyPos         []int
	ncols          int
	firstSQL       string
	nextSQL        string
	replaceSQL     string
	intKey         bool
	ss             serverSide
	waits          *throttle.LockWaits
	target         time.Duration
	contended      bool

	chunkTime atomic.Int64 // current ChunkTime, changeable while running
	copied    atomic.Int64
	chunkSize atomic.Int64
	lockTime  atomic.Int64 // total nanoseconds spent in source reads

	mu        sync.Mutex
	watermark []any // key of the last row written; nil before the first chunk
	done      bool
}

// New prepares a copier from ti into the shadow table named shadowName. reader must use the
// binary protocol (dbconn.OpenRowReader), writer a binary-charset session (OpenRowWriter). gate
// is shared with the binlog replayer (see binlog.Replayer.Gate).
func New(reader, writer *sql.DB, ti *table.Info, shadowName string, gate *sync.RWMutex, cfg Config) (*Copier, error) {
	key, ok := ti.CopyKey()
	if !ok {
		return nil, fmt.Errorf("%s has no PRIMARY KEY or UNIQUE NOT NULL key to copy by", ti.QuotedName())
	}
	if cfg.ChunkTime <= 0 {
		cfg.ChunkTime = DefaultChunkTime
	}
	if cfg.IdleChunkTime == 0 {
		cfg.IdleChunkTime = DefaultIdleChunkTime
	}
	if cfg.RestRatio == 0 {
		cfg.RestRatio = DefaultRestRatio
	}
	c := &Copier{reader: reader, writer: writer, ti: ti, shadow: shadowName, cfg: cfg, gate: gate, keyCols: key.ColumnNames(),
		waits: throttle.NewLockWaits(writer)}
	cols := ti.CopyColumns()
	c.ncols = len(cols)
	names := make([]string, len(cols))
	for i, col := range cols {
		names[i] = dbconn.QuoteIdent(col.Name)
		for _, k := range c.keyCols {
			if strings.EqualFold(k, col.Name) {
				c.keyPos = append(c.keyPos, i)
			}
		}
	}
	if len(c.keyPos) != len(c.keyCols) {
		return nil, fmt.Errorf("key columns of %s are not all copied", ti.QuotedName())
	}
	if len(c.keyCols) == 1 {
		col, _ := ti.Column(c.keyCols[0])
		switch strings.ToLower(col.DataType) {
		case "tinyint", "smallint", "mediumint", "int", "bigint":
			c.intKey = true
		}
	}
	quotedKey := make([]string, len(c.keyCols))
	for i, k := range c.keyCols {
		quotedKey[i] = dbconn.QuoteIdent(k)
	}
	base := fmt.Sprintf("SELECT %s FROM %s FORCE INDEX (%s)", strings.Join(names, ","), ti.QuotedName(), dbconn.QuoteIdent(key.Name))
	order := " ORDER BY " + strings.Join(quotedKey, ",") + " LIMIT ?"
	c.firstSQL = base + order
	c.nextSQL = base + " WHERE " + table.AfterPredicate(quotedKey) + order
	c.replaceSQL = "REPLACE INTO " + dbconn.QualifiedName(ti.Schema, shadowName) + " (" + strings.Join(names, ",") + ") VALUES "
	c.chunkTime.Store(int64(cfg.ChunkTime))
	c.prepareServerSide(names, quotedKey, key.Name)
	c.chunkSize.Store(initialChunk)
	return c, nil
}

type chunk struct {
	rows    [][]any
	lastKey []any
	bytes   int
}

// Run copies from the row after resumeAfter (nil: from the start) to the end of the table. It
// reads the next chunk while the previous one is written.
func (c *Copier) Run(ctx context.Context, resumeAfter []any) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if resumeAfter != nil {
		c.mu.Lock()
		c.watermark = resumeAfter
		c.mu.Unlock()
	}
	if !c.cfg.ClientSide {
		return c.runServerSide(ctx, resumeAfter)
	}
	chunks := make(chan chunk, 1)
	readErr := make(chan error, 1)
	go func() {
		defer close(chunks)
		readErr <- c.readLoop(ctx, resumeAfter, chunks)
	}()
	var writeErr error
	for ch := range chunks {
		if writeErr == nil {
			writeErr = c.write(ctx, ch)
			if writeErr != nil {
				cancel()
			}
		}
		c.gate.RUnlock() // taken by readLoop before the read
	}
	if err := <-readErr; err != nil && writeErr == nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if writeErr != nil {
		return writeErr
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

func (c *Copier) readLoop(ctx context.Context, after []any, out chan<- chunk) error {
	first, err := c.reader.PrepareContext(ctx, c.firstSQL)
	if err != nil {
		return fmt.Errorf("copy: prepare read: %w", err)
	}
	defer first.Close()
	next, err := c.reader.PrepareContext(ctx, c.nextSQL)
	if err != nil {
		return fmt.Errorf("copy: prepare read: %w", err)
	}
	defer next.Close()
	for {
		if c.cfg.Throttle != nil {
			if err := c.cfg.Throttle(ctx); err != nil {
				return err
			}
		}
		limit := int(c.chunkSize.Load())
		// Shared gate from before the read until the chunk is written: see binlog.Replayer.Gate.
		c.gate.RLock()
		start := time.Now()
		var rows *sql.Rows
		if after == nil {
			rows, err = first.QueryContext(ctx, limit)
		} else {
			rows, err = next.QueryContext(ctx, append(table.AfterArgs(after), limit)...)
		}
		var ch chunk
		if err == nil {
			ch, err = c.scan(rows, limit)
		}
		elapsed := time.Since(start)
		if err != nil {
			c.gate.RUnlock()
			return fmt.Errorf("copy: read chunk after %v: %w", after, err)
		}
		c.lockTime.Add(int64(elapsed))
		c.adapt(len(ch.rows), limit, elapsed, time.Duration(c.chunkTime.Load()))
		if len(ch.rows) == 0 {
			// End of table. Mark done while still holding the gate, so that from here on replay
			// applies every change (nothing is left for the copy to pick up).
			c.mu.Lock()
			c.done = true
			c.mu.Unlock()
			c.gate.RUnlock()
			return nil
		}
		after = ch.lastKey
		select {
		case out <- ch:
		case <-ctx.Done():
			c.gate.RUnlock()
			return ctx.Err()
		}
	}
}

func (c *Copier) scan(rows *sql.Rows, limit int) (chunk, error) {
	defer rows.Close()
	ch := chunk{rows: make([][]any, 0, limit)}
	for rows.Next() {
		vals, err := dbconn.ScanValues(rows, c.ncols)
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
	if err := rows.Err(); err != nil {
		return ch, err
	}
	if n := len(ch.rows); n > 0 {
		last := ch.rows[n-1]
		ch.lastKey = make([]any, len(c.keyPos))
		for i, p := range c.keyPos {
			ch.lastKey[i] = last[p]
		}
	}
	return ch, nil
}

// adapt moves the chunk size toward the row count that a read of ChunkTime returns, at most
// doubling or halving per step so one slow read (a disk hiccup) does not swing it wildly.
func (c *Copier) adapt(got, limit int, took, target time.Duration) {
	if got < limit || took <= 0 {
		return // a short last chunk says nothing about speed
	}
	ideal := int(float64(limit) * float64(target) / float64(took))
	ideal = max(min(ideal, limit*2, maxChunk), limit/2, minChunk)
	c.chunkSize.Store(int64(ideal))
}

func (c *Copier) write(ctx context.Context, ch chunk) error {
	tx, err := c.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("copy: begin: %w", err)
	}
	defer tx.Rollback()
	perRow := ch.bytes/len(ch.rows) + 16*c.ncols
	rowsPerStmt := max(1, min(len(ch.rows), maxWriteBytes/perRow))
	placeholders := "(" + strings.TrimSuffix(strings.Repeat("?,", c.ncols), ",") + ")"
	for start := 0; start < len(ch.rows); start += rowsPerStmt {
		end := min(start+rowsPerStmt, len(ch.rows))
		var b strings.Builder
		b.Grow(len(c.replaceSQL) + (end-start)*(len(placeholders)+1))
		b.WriteString(c.replaceSQL)
		args := make([]any, 0, (end-start)*c.ncols)
		for i, r := range ch.rows[start:end] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(placeholders)
			args = append(args, r...)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("copy: write %d rows to %s: %w", end-start, c.shadow, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("copy: commit: %w", err)
	}
	c.mu.Lock()
	c.watermark = ch.lastKey
	c.mu.Unlock()
	c.copied.Add(int64(len(ch.rows)))
	return nil
}

// SetChunkTime changes the lock-time target while the copy runs (live control).
func (c *Copier) SetChunkTime(d time.Duration) {
	if d > 0 {
		c.chunkTime.Store(int64(d))
	}
}

// Copied is the number of rows written so far.
func (c *Copier) Copied() int64 { return c.copied.Load() }

// ChunkSize is the current chunk size in rows.
func (c *Copier) ChunkSize() int64 { return c.chunkSize.Load() }

// LockTime is the total time spent in source reads (the time writers may have waited on us).
func (c *Copier) LockTime() time.Duration { return time.Duration(c.lockTime.Load()) }

// Watermark is the key of the last row written (nil before the first chunk), for resume.
func (c *Copier) Watermark() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watermark
}

// Skip reports whether a change to key can be left to the copy: true when the copy has not yet
// read that key and will read it later (so it sees the change's effect). Only single integer keys
// are compared, because Go cannot reproduce string collations; other keys are never skipped.
// The replayer calls it while holding the gate exclusively, so no chunk is between read and write.
func (c *Copier) Skip(key []any) bool {
	if !c.intKey || len(key) != 1 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return false
	}
	if c.watermark == nil {
		return true
	}
	cmp, ok := compareInts(key[0], c.watermark[0])
	return ok && cmp > 0
}
