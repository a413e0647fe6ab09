package migration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/migration/state"
)

// CommandHook returns a Hook that runs command through /bin/sh at every stage, with the
// migration's facts in ENGINEMIG_* environment variables. A non-zero exit of a start or before-*
// hook stops the migration cleanly; other stages only log the failure.
func CommandHook(command string, timeout time.Duration, log *slog.Logger) func(context.Context, Point, *state.State) error {
	if timeout <= 0 {
		timeout = time.Minute
	}
	log = dbconn.Logger(log)
	return func(ctx context.Context, point Point, st *state.State) error {
		hctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cmd := exec.CommandContext(hctx, "/bin/sh", "-c", command)
		cmd.Env = append(os.Environ(),
			"ENGINEMIG_STAGE="+point.String(),
			"ENGINEMIG_SCHEMA="+st.Schema,
			"ENGINEMIG_TABLE="+st.Table,
			"ENGINEMIG_MIGRATION_ID="+strconv.FormatInt(st.ID, 10),
			"ENGINEMIG_DRY_RUN="+strconv.FormatBool(st.DryRun),
			"ENGINEMIG_ROWS_TOTAL="+strconv.FormatInt(st.RowsTotal, 10),
			"ENGINEMIG_ROWS_COPIED="+strconv.FormatInt(st.RowsCopied, 10),
			"ENGINEMIG_CAPTURE="+string(st.CaptureMode()),
			"ENGINEMIG_CAPTURE_START="+string(st.CaptureStart),
			"ENGINEMIG_CAPTURE_CUTOVER="+string(st.CaptureCutover),
			"ENGINEMIG_ERROR="+st.Error,
		)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		msg := fmt.Errorf("hook at %s failed: %v: %s", point, err, strings.TrimSpace(string(out)))
		if point == PointStart || strings.HasPrefix(string(point), "before-") {
			return msg
		}
		log.Warn("hook failed after the fact; ignored", "error", msg)
		return nil
	}
}

// hook runs the user's hook at a point it is offered at, with a fresh snapshot of the state.
func (m *migrator) hook(ctx context.Context, at Point) error {
	if m.opts.Hook == nil || !slices.Contains(HookPoints, at) {
		return nil
	}
	m.rec.update(ctx, func(*state.State) {})
	st := m.rec.snapshot()
	return m.opts.Hook(ctx, at, &st)
}
