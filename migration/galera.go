package migration

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/plan"
)

// prepareGalera sets a migration up for a Galera node: plan's Galera checks for the table (the
// cluster's state and settings, on server as preflight read it, and that no other node holds
// rows of it), the Galera cut-over,
// and a shadow created with every index. A secondary index built after the copy would be an ALTER
// in total-order isolation: every node's writes would wait for the build, and it aborts the
// replay's transactions on the shadow (error 1213). Built on the empty shadow, before capture
// starts, it costs nothing of that; the copy then maintains the indexes row by row.
func (m *migrator) prepareGalera(ctx context.Context, ti *table.Info, server *plan.ServerInfo) error {
	m.opts.Cutover.Galera = true
	findings, err := plan.CheckGalera(ctx, m.db, server, ti, string(m.capture), nil, plan.OpenWithAccount(m.opts.Conn))
	if err != nil {
		return fmt.Errorf("galera checks: %w", err)
	}
	for _, f := range findings {
		if f.Severity == plan.Blocker {
			return preflight.Refuse(f.Remedy, "%s: [%s] %s", ti.QuotedName(), f.Check, f.Message)
		}
	}
	rowID := !m.opts.KeepKeyless && table.RowIDSupported(m.version)
	if _, ok := ti.CopyKey(); !ok {
		if err := refuseKeyless(ti, rowID); err != nil {
			return err
		}
	}
	// Unique secondary indexes too: replay and the copy keep the shadow equal to the source with
	// them in place (shadow/order.go, "unique secondary indexes").
	if m.ddl, err = ti.Shadow(table.ShadowName(ti.Name), false, rowID); err != nil {
		return preflight.Refuse("", "%v", err)
	}
	if m.galeraMaxChunk, err = galeraChunkLimit(ctx, m.db, ti); err != nil {
		return err
	}
	m.log.Info("Galera node: the shadow gets every index at once, the cut-over is the Galera one")
	return nil
}

// refuseKeyless refuses a table without a usable key on a Galera node. One with a unique index
// (over a NULLable, prefix or generated column, or it would be the key) cannot be converted there
// at all: its rows are addressed by content and written with plain INSERT (shadow/order.go, rule
// 5), so with the index in the shadow from the start the copy or replay stops with a duplicate-key
// error at the first row whose value another row held a moment before (shadow/order.go, "unique
// secondary indexes"). One without any unique index converts when the InnoDB table gets the row
// id: the shadow is written only by enginemig, under LOCK TABLES whose writes replicate at each
// statement's commit, and no total-order statement touches it during the copy. Without the row id
// (--keep-keyless) the cluster would apply every row event on it by a table scan.
func refuseKeyless(ti *table.Info, rowID bool) error {
	for _, ix := range ti.Indexes {
		if ix.Unique {
			return preflight.Refuse("give the table a primary key, or convert it before the node joins a cluster",
				"%s has no primary key and its unique index `%s` addresses no row (a NULLable, prefix or generated column): on a Galera node the shadow has every index from the start, and a table without a key is written there with plain INSERTs, which that index stops with a duplicate-key error as soon as a row takes a value another row just gave up", ti.QuotedName(), ix.Name)
		}
	}
	if rowID {
		return nil
	}
	return preflight.Refuse("drop --keep-keyless so the InnoDB table gets the row id, or give the table a primary key",
		"%s has no primary or unique key and gets no row id (--keep-keyless, or a server without invisible columns): on a Galera node every node would apply each of its row changes by a table scan", ti.QuotedName())
}

// replayBatchRows is the most rows one replay batch can write: 2000 changes (binlog.Replayer),
// each at most a delete and a write (a key change).
const replayBatchRows = 4000

// galeraChunkLimit is the most rows a copy chunk may write so that its write set stays below
// wsrep_max_ws_rows and wsrep_max_ws_size (0: no limit). A write set over either is refused by
// the cluster and the statement fails. Half of each limit leaves room for rows longer than the
// table's average. A row limit too small for a replay batch is refused.
func galeraChunkLimit(ctx context.Context, db *sql.DB, ti *table.Info) (int, error) {
	var maxRows, maxSize int64
	if err := db.QueryRowContext(ctx, table.GaleraWriteSetLimits).Scan(&maxRows, &maxSize); err != nil {
		return 0, fmt.Errorf("read the write-set limits: %w", err)
	}
	if maxRows > 0 && maxRows < replayBatchRows {
		return 0, preflight.Refuse(fmt.Sprintf("SET GLOBAL wsrep_max_ws_rows = 0 (no limit) or at least %d for the conversion", replayBatchRows),
			"wsrep_max_ws_rows=%d: a replay batch writes up to %d rows in one transaction, which the cluster would refuse", maxRows, replayBatchRows)
	}
	limit := int64(0)
	if maxRows > 0 {
		limit = maxRows / 2
	}
	if avg := ti.DataLength / max(ti.Rows, 1); maxSize > 0 && avg > 0 {
		if bySize := maxSize / 2 / avg; limit == 0 || bySize < limit {
			limit = bySize
		}
	}
	return int(min(limit, 1<<30)), nil
}
