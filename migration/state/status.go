package state

import (
	"context"
	"database/sql"
	"time"

	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/shadow"
)

// ServerPosition is the server's current position in the terms of st's capture, for StatusOf
// ("" when the capture has none, or the user may not read it).
func ServerPosition(ctx context.Context, db *sql.DB, st State) shadow.Position {
	p, _ := shadow.Now(ctx, db, st.CaptureMode())
	return p
}

// StatusOf is a recorded migration as a control.Status, plus what can be derived from it at now:
// the copy's ETA from its rate so far and, when server is given (see ServerPosition), how far the
// saved capture position trails the server's.
func StatusOf(st State, server shadow.Position, now time.Time) control.Status {
	s := control.Status{MigrationID: st.ID, Schema: st.Schema, Table: st.Table, Stage: st.Stage.String(), DryRun: st.DryRun,
		RowsTotal: st.RowsTotal, RowsCopied: st.RowsCopied, CopyWatermark: st.Watermark, CaptureChanges: st.CaptureChanges,
		CaptureStart: string(st.CaptureStart), CaptureResume: string(st.CaptureResume), CaptureCutover: string(st.CaptureCutover),
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
	s.CaptureBehindBytes, s.CaptureBehind = shadow.Behind(st.CaptureMode(), st.CaptureResume, server)
	return s
}
