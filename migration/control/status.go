package control

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/pace/diskspace"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/pace/throttle"
)

// Status describes one migration. The running apply answers `status` on its control socket with
// one (`enginemig control status`), and `enginemig status` builds one per migration recorded in the
// state table; fields only one of them knows are omitted by the other.
type Status struct {
	MigrationID int64  `json:"migration_id"`
	Schema      string `json:"schema"`
	Table       string `json:"table"`
	Stage       string `json:"stage"`
	DryRun      bool   `json:"dry_run,omitempty"`

	RowsTotal  int64 `json:"rows_total"` // the server's estimate: the copy can pass it
	RowsCopied int64 `json:"rows_copied"`
	// ChunkSize is the copier's current chunk in rows (live only).
	ChunkSize int64 `json:"chunk_size,omitempty"`
	// RowsVerified are the rows verification compared so far (live only).
	RowsVerified int64 `json:"rows_verified,omitempty"`
	// StageRate is the current stage's own rate in rows per second (live only).
	StageRate float64 `json:"stage_rows_per_second,omitempty"`
	// CopyETA is the rest of the copy at the rate so far (empty when not copying).
	CopyETA string `json:"copy_eta,omitempty"`
	// StageETA is the rest of the current stage (copy or verification) at its own rate, RunETA
	// the rest of copy and verification together, verification counted at the cost sampled
	// during the copy (live only; 0: unknown, or nothing left to count).
	StageETA time.Duration `json:"stage_eta_ns,omitempty"`
	RunETA   time.Duration `json:"run_eta_ns,omitempty"`
	// CopyWatermark is the last copied key as saved for a resume (state table only).
	CopyWatermark string `json:"copy_watermark,omitempty"`

	// CaptureChanges counts the changes captured for the table: row changes read from the
	// binlog, or keys noted by trigger capture and synced.
	CaptureChanges int64 `json:"capture_changes"`
	// CaptureAppliedOps counts the capture's writes to the shadow: replayed operations after the
	// ordering rule left some to the copy, or syncs (live only).
	CaptureAppliedOps int64 `json:"capture_applied_ops,omitempty"`
	// CapturePosition is the position the capture has applied up to (live only, binlog capture;
	// the state table has the last saved one in CaptureResume).
	CapturePosition string `json:"capture_position,omitempty"`
	// CaptureCatchingUp is true while a backlog was waiting at the capture's last batch or sync
	// (live only).
	CaptureCatchingUp bool `json:"capture_catching_up,omitempty"`
	// CaptureBehind says how far the capture's position (live: the applied one; state table: the
	// last saved one) trails the server's, in bytes when both are in the same binlog file.
	CaptureBehind      string `json:"capture_behind,omitempty"`
	CaptureBehindBytes int64  `json:"capture_behind_bytes,omitempty"`
	// CaptureLagSeconds is how long ago the oldest change read but not yet applied happened; 0
	// while the capture waits for changes, or cannot tell (live only).
	CaptureLagSeconds float64 `json:"capture_lag_seconds,omitempty"`
	// CutoverAttempts counts the cut-over's attempts so far, CutoverLockHeld is how long the
	// successful one held the table locked (live only).
	CutoverAttempts int           `json:"cutover_attempts,omitempty"`
	CutoverLockHeld time.Duration `json:"cutover_lock_held_ns,omitempty"`

	// The capture's positions, as it spells them (binlog: file:offset; trigger capture has none):
	// where it started, where a resumed run restarts it, and the one read under the cut-over's
	// lock, where a rollback's capture starts.
	CaptureStart   string `json:"capture_start,omitempty"`
	CaptureResume  string `json:"capture_resume,omitempty"`
	CaptureCutover string `json:"capture_cutover,omitempty"`

	// Throttle is the copy throttle's view: paused, why the copy waits, replica lag (live only).
	Throttle *throttle.Status `json:"throttle,omitempty"`
	// Disk is the free-space watch's last reading of the server's file systems (live only; absent
	// when free space cannot be read).
	Disk *diskspace.Status `json:"disk,omitempty"`
	// Pace is the automatic pacing's level (0: the copy rests most, top: two workers, no rest)
	// and the cause of its last back-off (live only; absent with --fixed-pace).
	Pace *throttle.GentleState `json:"pace,omitempty"`

	// Waiting lists what the migration waits on now: a lock another session holds (with the
	// holders), long queries before the cut-over, the throttle, a postponed cut-over (live only).
	Waiting []lockwait.Wait `json:"waiting,omitempty"`
	// LockWaits counts the lock waits of the migration's statements seen so far (live only).
	LockWaits int64 `json:"lock_waits,omitempty"`

	// Elapsed is the time since the migration started (until it finished, for a finished one).
	Elapsed    time.Duration `json:"elapsed_ns"`
	StartedAt  time.Time     `json:"started_at,omitzero"`
	UpdatedAt  time.Time     `json:"updated_at,omitzero"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
	Error      string        `json:"error,omitempty"`
	// Interrupted: the record says the migration is running, but no enginemig holds the table's
	// lock any more (its process died); Remedy says what to run (state table only).
	Interrupted bool   `json:"interrupted,omitempty"`
	Remedy      string `json:"remedy,omitempty"`
}

// GetStatus asks the apply listening on the control socket at path for its status.
func GetStatus(ctx context.Context, path string) (Status, error) {
	reply, err := Send(ctx, path, "status")
	if err != nil {
		return Status{}, err
	}
	var st Status
	if err := json.Unmarshal([]byte(reply), &st); err != nil {
		return Status{}, fmt.Errorf("control: status reply from %s is not a status: %w", path, err)
	}
	return st, nil
}
