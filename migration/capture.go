package migration

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/shadow"
	"github.com/enginemig/enginemig/table"
)

// captureSQL spells trigger capture from ti into its shadow, or (back) from the converted table
// into the kept original for a rollback.
func captureSQL(ti *table.Info, back bool) (*table.CaptureSQL, error) {
	target := table.ShadowName(ti.Name)
	if back {
		target = table.OldName(ti.Name)
	}
	q, err := table.NewSQL(ti, target)
	if err != nil {
		return nil, err
	}
	return q.Capture(ti, table.ChangeLogName(ti.Name, back)), nil
}

// removeCapture drops ti's capture triggers and change log (whichever exist; the triggers move
// with their table when it is renamed, and are found by name). It runs before the shadow is
// dropped on every path: a trigger left behind would write to a log that is gone, and fail the
// application's writes.
func removeCapture(ctx context.Context, db *sql.DB, ti *table.Info, back bool) error {
	c, err := captureSQL(ti, back)
	if err != nil {
		return err
	}
	return shadow.RemoveTriggers(ctx, db, c)
}

// dropCaptureLeftovers removes every capture trigger on the table and its working tables, then
// the change logs (cleanup after a run that died), and returns what it dropped.
func dropCaptureLeftovers(ctx context.Context, db *sql.DB, schema, name string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?
		AND EVENT_OBJECT_TABLE IN (?, ?, ?) AND TRIGGER_NAME LIKE '\_emcap\_%'`, schema, name, table.ShadowName(name), table.OldName(name))
	if err != nil {
		return nil, fmt.Errorf("find capture triggers: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	var dropped []string
	for _, n := range names {
		if _, err := db.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+dbconn.QualifiedName(schema, n)); err != nil {
			return dropped, fmt.Errorf("drop capture trigger %s: %w", n, err)
		}
		dropped = append(dropped, n)
	}
	for _, back := range []bool{false, true} {
		log := table.ChangeLogName(name, back)
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, log).Scan(&n); err != nil {
			return dropped, err
		}
		if n == 0 {
			continue
		}
		if _, err := db.ExecContext(ctx, "DROP TABLE "+dbconn.QualifiedName(schema, log)); err != nil {
			return dropped, fmt.Errorf("drop change log %s: %w", log, err)
		}
		dropped = append(dropped, log)
	}
	return dropped, nil
}
