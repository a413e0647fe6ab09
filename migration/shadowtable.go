package migration

import (
	"context"
	"database/sql"

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

func (m *migrator) dropShadow(ctx context.Context) error {
	if err := shadow.Remove(context.WithoutCancel(ctx), applyCapture(m.db, m.ti, m.capture)); err != nil {
		return err
	}
	_, err := m.db.ExecContext(context.WithoutCancel(ctx), table.DropTableIfExists(m.ti.Schema, table.ShadowName(m.ti.Name)))
	return err
}
