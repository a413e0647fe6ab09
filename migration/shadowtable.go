package migration

import (
	"context"
	"database/sql"

	"github.com/enginemig/enginemig/shadow"
	"github.com/enginemig/enginemig/table"
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

// shadowDDL is the shadow's DDL with deferIndexes' indexes left for after the copy (every index at
// once under faults.Faults.AllIndexesUpFront).
func (m *migrator) shadowDDL(deferIndexes table.Defer) (table.ShadowDDL, error) {
	if m.opts.seams.AllIndexesUpFront {
		deferIndexes = table.DeferNone
	}
	return m.ti.Shadow(table.ShadowName(m.ti.Name), deferIndexes, !m.opts.KeepKeyless && table.RowIDSupported(m.version))
}

// indexesWithCopy gives the shadow its plain secondary indexes from the start when the
// application is busy as the copy begins (the pace leaves it no room): a build after the copy is
// one statement that takes a core for seconds and cannot rest, while the copy maintains them in
// chunks the pace rests after. Unique indexes stay deferred: only some captures write in the way
// that keeps a unique index in the shadow correct during the copy ("A unique secondary index in
// the shadow"). A resumed run keeps the shadow it has.
func (m *migrator) indexesWithCopy() error {
	g := m.gentle.Load()
	if m.resume != nil || g == nil || g.Room() || len(m.ddl.Deferred) == 0 {
		return nil
	}
	ddl, err := m.shadowDDL(table.DeferUnique)
	if err != nil || len(ddl.Deferred) == len(m.ddl.Deferred) {
		return err
	}
	m.log.Info("the shadow gets its secondary indexes from the start: the application needs the server, and an index build after the copy cannot rest",
		"indexes", len(m.ddl.Deferred)-len(ddl.Deferred))
	m.ddl, m.deferred, m.res.DeferredIndex = ddl, ddl.Deferred, len(ddl.Deferred)
	return nil
}
