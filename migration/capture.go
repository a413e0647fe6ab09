package migration

import (
	"database/sql"

	"github.com/enginemig/enginemig/shadow"
	"github.com/enginemig/enginemig/table"
)

// applyCapture is where an apply's capture runs: from the table into its shadow. What the
// capture sets up on the server follows from it (shadow.Remove).
func applyCapture(db *sql.DB, ti *table.Info, mode shadow.Mode) shadow.Config {
	return shadow.Config{DB: db, Source: ti, Target: table.ShadowName(ti.Name), Mode: mode, ChangeLog: table.ChangeLogName(ti.Name, false)}
}
