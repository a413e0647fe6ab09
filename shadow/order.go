package shadow

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// order is the rule that keeps the target equal to the source while the copy and the capture
// both write to it. It is enforced here and nowhere else:
//
//  1. A chunk's read and its write are one unit against replay. Replay never applies a batch
//     while a chunk is between its read of the source and its write to the target (the copy
//     holds the order shared, replay exclusively). Otherwise a change made after the chunk was
//     read could be applied before the chunk's older rows are written, and those rows would then
//     overwrite it: a deleted row would come back, an update would be lost. A batch's commit
//     may follow after the order is released: its rows stay locked in InnoDB until then.
//  2. Replay may drop an UPDATE's new row for a key the copy will still read
//     (copier.Copier.Ahead): the copy reads the row later, with the change in it. Asked under the
//     exclusive order, so the watermark does not move meanwhile; only single integer keys, which
//     Go orders exactly as the server does. Inserts and deletes are always applied (see
//     toWrite). This is the only place that leaves a captured change out.
//  3. Trigger capture's syncs take the order exclusively, like replay batches, and the copy
//     writes with INSERT IGNORE (Capture.CopyMode): a row a sync wrote is at least as new as the
//     chunk's, and a change after the sync has left a note for the next one. MyISAM's table lock
//     makes each source statement and its trigger's notes one unit against a chunk's
//     INSERT ... SELECT and against a sync (shadow/triggercapture.go).
//  4. A resume restarts from a checkpoint taken in this order: the copy watermark first, then the
//     capture's resume position. Both only move forward, so every chunk up to the saved watermark
//     is written and every change before the saved position applied; rows above the watermark
//     are removed before the copy restarts (Rewind).
//  5. A table without a unique key (table.SQL.Keyless) has no idempotent replay: a change
//     written twice duplicates a row or removes a second copy of it. So each change lands exactly
//     once, in a chunk's read or in the replay: each chunk is read while the source is
//     READ-locked, with the binlog position read in the same locked session (copier.Marker), and
//     a change is written only if its row's chunk was read at a position before the change's
//     event (marks.go); every other change is in a chunk already read, or will be. A range is
//     marked only once its rows are written, and the chunk holds the order from before its lock
//     until then (rule 1), whether it writes them under the lock or, on a Galera node, after
//     letting the source go (copier.Config.WriteApart: the rows wait in the session's stage
//     meanwhile): either way no replayed change to the range is decided or written between the
//     read and the write. Trigger
//     capture has no positions but needs none: a note names a group of rows sharing a chunk-key
//     value, and a sync rewrites the whole group from the source (idempotent), only for groups
//     the copy has written (up to its watermark; syncUpTo), leaving the rest to the copy. Rules
//     2 and 3 do not apply, and a resume copies again from the start (rule 4's positions do not
//     say which changes were written).
//
// Unique secondary indexes. On a Galera node the target has every index from the start
// (migration/galera.go), as everywhere an index that carries the AUTO_INCREMENT column: a write
// of row k with a unique value v then also removes the target's row k' holding v. That k' is out of date
// (MyISAM checks each row as it writes it, so no point of the source has v in two rows), and these
// rules bring it back, for a keyed table whose rows are always written whole with REPLACE:
//   - every change after the point of the source a write reproduces (a replayed change: its
//     event; a chunk: its read) is applied after that write: replay writes in binlog order, and a
//     chunk holds the order from before its read until its rows are written (rule 1); a resume
//     replays again from its saved position (rule 4), so this holds across one;
//   - if the source's k' does not hold v at the end, the target's row was out of date anyway, and
//     what brings it up to date (as without the index) had not been written before the removal;
//   - if it does, the last change to k' came after the point of the write that removed it (k held
//     v there, so k' did not): it is applied after that write, a REPLACE of the whole row whether
//     the target has it or not; or rule 2 drops it because the copy will still read k', in a chunk
//     that begins after.
//
// Hence a replayed UPDATE must stay a REPLACE (an UPDATE would not bring k' back). Not covered by
// the argument: trigger capture's INSERT IGNORE (rule 3) drops the chunk's row rather than remove
// the out-of-date one, and a table without a key (rule 5) writes plain INSERTs, which stop with a
// duplicate-key error; so on Galera, where the index cannot be built after the copy, both are
// refused.
type order struct {
	mu    sync.RWMutex
	copy  atomic.Pointer[copier.Copier] // nil until the copy starts: then nothing is skipped
	marks *marks                        // rule 5, set at Open for a keyless table being filled
	// groups: rule 5 for trigger capture, set at Open for a keyless table being filled.
	groups bool
}

// syncUpTo is rule 5 for trigger capture, asked under the exclusive order: whether a sync may
// rewrite every noted group (all), none yet (the copy has written no chunk), or those up to hi.
func (o *order) syncUpTo() (all bool, hi []any) {
	if !o.groups {
		return true, nil
	}
	c := o.copy.Load()
	if c == nil {
		return false, nil
	}
	if c.AllWritten() {
		return true, nil
	}
	return false, c.Watermark()
}

// BeginChunk holds the order shared for one chunk (rule 1); end may be called from any goroutine.
func (o *order) BeginChunk() (end func()) {
	o.mu.RLock()
	return o.mu.RUnlock
}

// Marking reports a copy whose chunks must be marked (rule 5, binlog capture).
func (o *order) Marking() bool { return o.marks != nil }

// Mark is the copy's Marker (rule 5).
func (o *order) Mark(ctx context.Context, q *sql.Conn) (func(r table.Range), error) {
	if o.marks == nil {
		return nil, errors.New("this capture does not mark positions: a table without a unique key needs binlog capture")
	}
	return o.marks.mark(ctx, q)
}

// Exclusive runs fn while no chunk is in flight and no batch is being written (the last one's
// commit may be pending: what fn writes to the same rows waits for it).
func (o *order) Exclusive(fn func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fn()
}

// replay wraps the applier for the replayer: each batch is written exclusively (rule 1), without
// the changes the copy will still pick up (rule 2). It commits after releasing the order: until
// then InnoDB keeps its rows locked, so a chunk that writes one of them waits for the commit, and
// every change in the batch was made to the source before that chunk reads it. Committing under
// the order made chunks wait for its redo log flush as well (docs/bench/constants.md,
// "Measurements behind the code's constants").
func (o *order) replay(a *binlog.Applier, q *table.SQL) func(ctx context.Context, batch []binlog.Change) (int, error) {
	return func(ctx context.Context, batch []binlog.Change) (int, error) {
		// A batch the cluster aborted runs again as a batch of its own would: under the order
		// again, rule 2 applied afresh (dbconn.RetryClusterAborts).
		var n int
		err := dbconn.RetryClusterAborts(ctx, func() error {
			o.mu.Lock()
			changes, err := o.toWrite(ctx, batch, q.KeyPositions())
			var written int
			commit := func() error { return nil }
			if err == nil {
				written, commit, err = a.Write(ctx, changes)
			}
			o.mu.Unlock()
			if err != nil {
				return err
			}
			n = written
			return commit()
		})
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// toWrite is rule 2, applied under the exclusive order: it returns batch without the new rows of
// UPDATEs whose key the copy will still read. An UPDATE that changed its key keeps the delete of
// the old one. Only an UPDATE's new row may go: a MyISAM INSERT can run as a concurrent insert
// beside readers, and its row becomes visible to new readers only when it releases its lock, after
// its binlog event is written, so a chunk that starts in that gap misses the row and the copy
// cannot be trusted to bring an insert replay dropped (seen in the concurrent-writers test:
// docs/bench/constants.md, "Measurements behind the code's constants"). Deletes then follow the inserts they
// may undo. An UPDATE holds MyISAM's write lock until after its event is written, so any chunk
// that starts after replay saw the event reads the new row.
func (o *order) toWrite(ctx context.Context, batch []binlog.Change, keyAt []int) ([]binlog.Change, error) {
	if o.marks != nil {
		return o.marks.toWrite(ctx, batch, keyAt)
	}
	c := o.copy.Load()
	if c == nil {
		return batch, nil // before the copy starts nothing is skipped
	}
	return skipAhead(batch, keyAt, c.Ahead), nil
}

// skipAhead leaves out the new rows of UPDATEs to keys ahead reports the copy will still read.
func skipAhead(batch []binlog.Change, keyAt []int, ahead func(key []any) bool) []binlog.Change {
	out := batch[:0:0]
	for _, ch := range batch {
		if ch.Kind != binlog.Update || !ahead(keyOf(ch.After, keyAt)) {
			out = append(out, ch)
			continue
		}
		if !reflect.DeepEqual(keyOf(ch.Before, keyAt), keyOf(ch.After, keyAt)) {
			out = append(out, binlog.Change{Kind: binlog.Delete, Before: ch.Before})
		}
	}
	return out
}

// keyOf is the key of a row image (the values at the key's column positions).
func keyOf(row []any, at []int) []any {
	k := make([]any, len(at))
	for i, p := range at {
		k[i] = row[p]
	}
	return k
}
