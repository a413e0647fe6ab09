package migration

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/control"
	"github.com/enginemig/enginemig/copier"
)

// DefaultChunkTime is the copy's target duration of one chunk's source read when
// Options.ChunkTime is zero.
const DefaultChunkTime = copier.DefaultChunkTime

// ServerPosition is where the server is writing its binlog now, for StatusOf.
func ServerPosition(ctx context.Context, db *sql.DB) (file string, pos uint32, err error) {
	p, err := binlog.CurrentPosition(ctx, db)
	return p.Name, p.Pos, err
}

// StatusOf is a recorded migration as a control.Status, plus what can be derived from it at now:
// the copy's ETA from its rate so far and, when serverFile is given (see ServerPosition), how far
// the saved replay position trails the server's binlog.
func StatusOf(st State, serverFile string, serverPos uint32, now time.Time) control.Status {
	s := control.Status{MigrationID: st.ID, Schema: st.Schema, Table: st.Table, Stage: st.Stage.String(), DryRun: st.DryRun,
		RowsTotal: st.RowsTotal, RowsCopied: st.RowsCopied, CopyWatermark: st.Watermark, ReplayEvents: st.EventsApplied,
		BinlogStartFile: st.StartFile, BinlogStartPos: st.StartPos, BinlogAppliedFile: st.AppliedFile, BinlogAppliedPos: st.AppliedPos,
		BinlogCutoverFile: st.CutoverFile, BinlogCutoverPos: st.CutoverPos,
		StartedAt: st.StartedAt, UpdatedAt: st.UpdatedAt, FinishedAt: st.FinishedAt, Error: st.Error}
	switch {
	case st.StartedAt.IsZero():
	case st.FinishedAt != nil:
		s.Elapsed = st.FinishedAt.Sub(st.StartedAt)
		return s
	default:
		s.Elapsed = now.Sub(st.StartedAt)
	}
	if st.Stage == StageCopy && st.RowsCopied > 0 && st.RowsTotal > st.RowsCopied {
		elapsed := st.UpdatedAt.Sub(st.StartedAt).Seconds()
		if elapsed > 0 {
			rate := float64(st.RowsCopied) / elapsed
			s.CopyETA = time.Duration(float64(st.RowsTotal-st.RowsCopied) / rate * float64(time.Second)).Round(time.Second).String()
		}
	}
	switch {
	case st.AppliedFile == "" || serverFile == "":
	case st.AppliedFile == serverFile && serverPos >= st.AppliedPos:
		s.ReplayBehindBytes = int64(serverPos - st.AppliedPos)
		s.ReplayBehind = fmt.Sprintf("%d bytes", s.ReplayBehindBytes)
	default:
		s.ReplayBehind = fmt.Sprintf("from %s:%d (server at %s:%d)", st.AppliedFile, st.AppliedPos, serverFile, serverPos)
	}
	return s
}
