package copier

import (
	"context"
	"database/sql"
	"time"
)

// DefaultIdleChunkTime is the longest a chunk may hold the source lock while nobody waits for it.
// With no waiting client, a long chunk costs nothing and saves per-statement overhead (each chunk
// is a commit); as soon as a client waits, chunks drop back to ChunkTime.
const DefaultIdleChunkTime = 250 * time.Millisecond

// lockWaits watches the server's Table_locks_waited counter: it grows whenever a statement had
// to wait for a MyISAM table lock, which during the copy mostly means "waited for us".
type lockWaits struct {
	db   *sql.DB
	last int64
	ok   bool
}

// contended reports whether any lock wait happened since the previous call. Errors count as
// contended: when in doubt, stay gentle.
func (l *lockWaits) contended(ctx context.Context) bool {
	var name string
	var v int64
	if err := l.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Table_locks_waited'").Scan(&name, &v); err != nil {
		return true
	}
	prev, had := l.last, l.ok
	l.last, l.ok = v, true
	return !had || v > prev
}

// chunkTarget picks this chunk's lock-time target: ChunkTime under contention, otherwise up to
// twice the previous target, capped at IdleChunkTime.
func (c *Copier) chunkTarget(ctx context.Context) time.Duration {
	if c.cfg.IdleChunkTime <= c.cfg.ChunkTime {
		return c.cfg.ChunkTime
	}
	if c.waits.contended(ctx) {
		c.target = c.cfg.ChunkTime
	} else {
		c.target = min(max(c.target, c.cfg.ChunkTime)*2, c.cfg.IdleChunkTime)
	}
	return c.target
}
