package migration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/plan"
	"github.com/enginemig/enginemig/table"
)

// galeraNode reports whether the server is a node of a Galera cluster (wsrep_on=ON). MySQL has
// no such variable: an error means no.
func galeraNode(ctx context.Context, db *sql.DB) bool {
	var on sql.NullInt64
	return db.QueryRowContext(ctx, "SELECT @@GLOBAL.wsrep_on").Scan(&on) == nil && on.Int64 == 1
}

// prepareGalera sets a migration up for a Galera node: plan's Galera checks for the table (the
// cluster's state and settings, and that no other node holds rows of it), the Galera cut-over,
// and a shadow created with every index. A secondary index built after the copy would be an ALTER
// in total-order isolation: every node's writes would wait for the build, and it aborts the
// replay's transactions on the shadow (error 1213). Built on the empty shadow, before capture
// starts, it costs nothing of that; the copy then maintains the indexes row by row.
func (m *migrator) prepareGalera(ctx context.Context, ti *table.Info) error {
	m.opts.Cutover.Galera = true
	findings, err := plan.CheckGalera(ctx, m.db, ti.Schema, ti.Name, nil, plan.OpenWithAccount(m.opts.Conn))
	if err != nil {
		return fmt.Errorf("galera checks: %w", err)
	}
	for _, f := range findings {
		if f.Severity == plan.Blocker {
			return refuse(f.Remedy, "%s: [%s] %s", ti.QuotedName(), f.Check, f.Message)
		}
	}
	deferrable, err := ti.Shadow(table.ShadowName(ti.Name), true)
	if err != nil {
		return refuse("", "%v", err)
	}
	for _, d := range deferrable.Deferred {
		if strings.HasPrefix(d, "UNIQUE") {
			return refuse("convert the table before the node joins a cluster, or drop the unique index for the conversion",
				"%s has a unique secondary index (%s): on a Galera node the shadow is created with its indexes, and a unique one there could turn a replayed change into the loss of another row; not supported on Galera yet", ti.QuotedName(), d)
		}
	}
	if m.ddl, err = ti.Shadow(table.ShadowName(ti.Name), false); err != nil {
		return refuse("", "%v", err)
	}
	m.log.Info("Galera node: the shadow gets every index at once, the cut-over is the Galera one")
	return nil
}

// errGaleraRollback is why rollback refuses on a Galera node. After the swap the InnoDB table is
// the cluster's: every node's application may write it, and those writes reach this node as
// replicated events. A rollback's lock on this node does not hold the other nodes' writers, its
// capture sees their changes only with log_slave_updates, and the MyISAM original it swaps back
// holds rows on this node only, so a swap back would lose every write made on the other nodes
// since the cut-over.
const errGaleraRollback = "rollback refuses on a Galera node: the converted table is replicated and written on every node, and swapping the MyISAM original back (whose rows live on this node only) would lose the writes made on the other nodes since the cut-over"

const galeraRollbackRemedy = "keep the InnoDB table; to undo by hand, stop the application's writes on every node, copy the InnoDB table's rows into the kept original (" +
	"INSERT ... SELECT), and rename the two tables in one RENAME TABLE"
