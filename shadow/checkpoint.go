package shadow

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Checkpoint is what a resumed migration needs, taken in the order of rule 4 (order.go).
type Checkpoint struct {
	Watermark []any    // last key the copy wrote (nil: none yet)
	ResumeAt  Position // capture restarts here ("" for a capture that needs no position)
}

// Checkpoint reads the copy watermark, then the capture's resume position.
func (p *Pipeline) Checkpoint() Checkpoint {
	var cp Checkpoint
	if c := p.order.copy.Load(); c != nil {
		cp.Watermark = c.Watermark()
	}
	cp.ResumeAt = p.capture.ResumeAt()
	return cp
}

// Progress is a snapshot of the counters.
type Progress struct {
	RowsCopied   int64
	ChunkSize    int64
	CopyLockTime time.Duration
	StagedChunks int64
	CopyWalk     copier.WalkStats
	RowsVerified int64
	Capture      Stats
}

// Start is where the capture started ("" for a capture that needs no position).
func (p *Pipeline) Start() Position { return p.capture.Start() }

// Progress returns the current counters.
func (p *Pipeline) Progress() Progress {
	pr := Progress{Capture: p.capture.Stats(), RowsVerified: p.verified.Load()}
	if c := p.order.copy.Load(); c != nil {
		pr.RowsCopied, pr.ChunkSize, pr.CopyLockTime, pr.StagedChunks = c.Copied(), c.ChunkSize(), c.LockTime(), c.Staged()
		pr.CopyWalk = c.Walk()
	}
	return pr
}

// SetChunkTime changes the copy's contended lock-time target (live control); false before the
// copy has started.
func (p *Pipeline) SetChunkTime(d time.Duration) bool {
	c := p.order.copy.Load()
	if c != nil {
		c.SetChunkTime(d)
	}
	return c != nil
}

// Rewind prepares a target for a resumed copy from watermark (rule 4): rows above it are removed,
// because the copy reads them again and some may have been deleted from the source since; with
// no watermark the target is emptied.
func Rewind(ctx context.Context, db *sql.DB, source *table.Info, target string, watermark []any) error {
	q, err := table.NewSQL(source, target)
	if err != nil {
		return err
	}
	query, args := q.DeleteRange(table.Range{Lo: watermark})
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("resume: remove rows above the copy watermark: %w", err)
	}
	return nil
}
