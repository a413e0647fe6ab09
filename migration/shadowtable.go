package migration

import (
	"context"
	"database/sql"
	"time"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/shadow"
)

// applyCapture is where an apply's capture runs: from the table into its shadow. What the
// capture sets up on the server follows from it (shadow.Remove).
func applyCapture(db *sql.DB, ti *table.Info, mode shadow.Mode) shadow.Config {
	return shadow.Config{DB: db, Source: ti, Target: table.ShadowName(ti.Name), Mode: mode, ChangeLog: table.ChangeLogName(ti.Name, false)}
}

// originalInPlace checks that the original table still exists under its name as MyISAM.
func (m *migrator) originalInPlace(ctx context.Context) bool {
	ti, err := table.Load(ctx, m.db, m.ti.Schema, m.ti.Name)
	return err == nil && ti.Engine == m.ti.Engine
}

// cleanupBudget bounds a failed or dry run's clean-up (the capture's removal, the shadow's DROP):
// past it the statement is stopped on the server (dbconn) and the run ends naming what is left
// for `enginemig cleanup`. Unbounded, a clean-up statement waiting for disk space, or for the
// metadata lock of an application statement that waits for it, held the run for good.
const cleanupBudget = 5 * time.Minute

// dropShadow removes the capture's set-up, then the shadow, if it is there: a DROP ... IF EXISTS
// of nothing is still written to the binlog, where a full disk holds it.
func (m *migrator) dropShadow(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBudget)
	defer cancel()
	if err := shadow.Remove(ctx, applyCapture(m.db, m.ti, m.capture)); err != nil {
		return err
	}
	name := table.ShadowName(m.ti.Name)
	there, err := table.Exists(ctx, m.db, m.ti.Schema, name)
	if err != nil || !there {
		return err
	}
	_, err = m.db.ExecContext(ctx, table.DropTableIfExists(m.ti.Schema, name))
	return err
}
