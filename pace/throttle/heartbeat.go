package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// maxHistory bounds the remembered heartbeat writes. At 4 writes a second it covers hours; a
// replica further behind than that is far past any lag limit, so precision no longer matters.
const maxHistory = 1 << 16

// heartbeat is this process's row in the heartbeat table: a sequence number that grows with every
// write, and the primary's UTC time for humans. Lag is measured without comparing clocks: the
// replica's sequence number tells which of our writes it has applied, and lag is how long ago (on
// our own monotonic clock) we wrote the first one it has not. Each process owns a row (random id),
// so concurrent enginemig runs on one primary do not disturb each other.
type heartbeat struct {
	table   string // quoted schema.table
	schema  string
	id      uint32
	seq     int64     // last sequence number written successfully
	history []written // writes not yet applied by every replica, oldest first
	err     error     // last write error, nil after a success
	okAt    time.Time // last successful write
}

type written struct {
	seq int64
	at  time.Time // local monotonic time the write committed
}

func (h *heartbeat) init(schema string) {
	h.schema = schema
	h.table = dbconn.QualifiedName(schema, table.OwnTableName(schema, "heartbeat"))
}

// setup creates the schema and table if needed, clears rows that crashed runs left behind, and
// claims a fresh id with the first heartbeat (sequence 1).
func (h *heartbeat) setup(ctx context.Context, db *sql.DB) error {
	stmts := []string{
		"CREATE DATABASE IF NOT EXISTS " + dbconn.QuoteIdent(h.schema),
		// InnoDB so the row replicates transactionally and a crash cannot lose or tear it.
		"CREATE TABLE IF NOT EXISTS " + h.table + " (id INT UNSIGNED NOT NULL PRIMARY KEY, " +
			"seq BIGINT UNSIGNED NOT NULL, ts DATETIME(6) NOT NULL) ENGINE=InnoDB",
		// A live run rewrites its row every Interval; an hour-old row belongs to a dead one.
		"DELETE FROM " + h.table + " WHERE ts < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR",
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("throttle: prepare heartbeat table %s: %w", h.table, err)
		}
	}
	for attempt := 0; ; attempt++ {
		h.id = rand.Uint32N(1<<31-1) + 1
		_, err := db.ExecContext(ctx, "INSERT INTO "+h.table+" (id, seq, ts) VALUES (?, 1, UTC_TIMESTAMP(6))", h.id)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 && attempt < 10 {
			continue // id taken by another run: pick another
		}
		if err != nil {
			return fmt.Errorf("throttle: write first heartbeat to %s: %w", h.table, err)
		}
		return nil
	}
}

// recordWrite notes the outcome of writing sequence number seq.
func (h *heartbeat) recordWrite(seq int64, err error, at time.Time) {
	if err != nil {
		h.err = err
		return
	}
	h.err, h.seq, h.okAt = nil, seq, at
	h.history = append(h.history, written{seq: seq, at: at})
	if len(h.history) > maxHistory {
		h.history = append(h.history[:0], h.history[len(h.history)/2:]...)
	}
}

// writeHeartbeat is the writer loop's step: REPLACE the row with the next sequence number.
func (t *Throttler) writeHeartbeat(ctx context.Context) {
	t.mu.Lock()
	next := t.hb.seq + 1
	t.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, t.checkTimeout())
	_, err := t.primary.ExecContext(wctx, "REPLACE INTO "+t.hb.table+" (id, seq, ts) VALUES (?, ?, UTC_TIMESTAMP(6))", t.hb.id, next)
	cancel()
	if ctx.Err() != nil {
		return // stopping
	}
	if err != nil {
		err = fmt.Errorf("write heartbeat: %w", err)
	}
	t.record(func() { t.hb.recordWrite(next, err, time.Now()) })
}

// checkReplica reads the replica's copy of our heartbeat row, and its SQL thread.
func (t *Throttler) checkReplica(ctx context.Context, i int) {
	r := t.replicas[i]
	cctx, cancel := context.WithTimeout(ctx, t.checkTimeout())
	var seq int64
	err := r.db.QueryRowContext(cctx, "SELECT seq FROM "+t.hb.table+" WHERE id = ?", t.hb.id).Scan(&seq)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if errors.Is(err, sql.ErrNoRows) {
		err = errors.New("heartbeat row not on the replica (replication stopped, not yet caught up, or filtered?)")
	}
	t.record(func() {
		t.replicas[i].seq = sample{value: seq, err: err, at: time.Now()}
		t.pruneLocked()
	})
	cctx, cancel = context.WithTimeout(ctx, t.checkTimeout())
	t.checkReplicaThreads(cctx, i)
	cancel()
}

// pruneLocked forgets writes that every replica has applied.
func (t *Throttler) pruneLocked() {
	applied := int64(-1)
	for _, r := range t.replicas {
		if r.seq.err != nil || r.seq.at.IsZero() {
			return // an unmeasured replica may still need the history
		}
		if applied < 0 || r.seq.value < applied {
			applied = r.seq.value
		}
	}
	// Keep the last write: a replica that has applied everything needs no history, but the
	// next one to fall behind is measured from the write after it.
	n := sort.Search(len(t.hb.history), func(i int) bool { return t.hb.history[i].seq > applied })
	n = min(n, len(t.hb.history)-1)
	if n > 0 {
		t.hb.history = append(t.hb.history[:0], t.hb.history[n:]...)
	}
}

// lagLocked is how long ago we wrote the oldest heartbeat the replica had not applied when last
// checked; 0 when it had applied all of them.
func (t *Throttler) lagLocked(applied int64, now time.Time) time.Duration {
	h := t.hb.history
	i := sort.Search(len(h), func(i int) bool { return h[i].seq > applied })
	if i == len(h) {
		return 0
	}
	return now.Sub(h[i].at)
}

// remove deletes this process's row; best effort, a leftover is cleared by the next Start.
func (h *heartbeat) remove(ctx context.Context, db *sql.DB) {
	db.ExecContext(ctx, "DELETE FROM "+h.table+" WHERE id = ?", h.id)
}
