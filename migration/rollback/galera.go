package rollback

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/plan"
	"github.com/enginemig/enginemig/shadow"
)

// prepareGalera readies a rollback on a Galera node (docs/how-it-works/rollback.md, "Rollback on
// Galera"), or refuses, changing nothing, where it could not be lossless. After the swap the InnoDB
// table is written on every node; rolling back means the MyISAM original, on this node (the one
// that held its rows), with every change made anywhere in the cluster since. The capture reads them
// from this node's binlog, where the write sets applied from the other nodes must be, and the swap
// back is the gated one (cutover.Swap.Gate). The table's own triggers go back as everywhere
// (carry): every step of it is a DDL sent while enginemig holds no lock.
func prepareGalera(ctx context.Context, db *sql.DB, opts *Options, st *state.State) error {
	if st.CaptureMode() != shadow.Binlog {
		return preflight.Refuse("keep the InnoDB table; to keep a rollback possible on a Galera node, convert with binlog capture (log_bin=ON, binlog_format=ROW, binlog_row_image=FULL)",
			"the conversion recorded %s capture, which cannot roll back losslessly on a Galera node: after the swap the InnoDB table is written on every node, a capture trigger on it fires only for this node's own writes (the other nodes' arrive as write sets, which fire no trigger), and there is no binlog position of the cut-over to replay the cluster's writes from", st.Capture)
	}
	g, err := plan.LoadGalera(ctx, db)
	switch {
	case err != nil:
		return fmt.Errorf("read the cluster's state: %w", err)
	case g == nil:
		return errors.New("read the cluster's state: wsrep_on is no longer ON on this node")
	case g.Status != "Primary" || g.State != "Synced":
		return preflight.Refuse("roll back once the node is Synced in the Primary component", "this node is %s in a %s component of %d node(s)", g.State, g.Status, g.Size)
	}
	if !g.BinlogsWriteSets {
		return preflight.Refuse("set log_slave_updates=ON (log_replica_updates) in the configuration of this node and restart it, or keep the InnoDB table; changes the other nodes made before that are not in its binlog, so roll back only conversions made after",
			"log_slave_updates is OFF: this node's binlog lacks the writes made on the other nodes, which a rollback must carry into the MyISAM table")
	}
	if !table.GateSortsFirst(opts.Table) {
		return preflight.Refuse("rename the table, or keep it InnoDB", "the table's name %q leaves no name for the swap-back's gate that sorts before it (or the gate's name would be over 64 characters)", opts.Table)
	}
	opts.Cutover.Galera = true
	opts.Logger.Info("Galera node: rolling back with the gated swap; the application must write through this node again afterwards", "cluster_size", g.Size)
	return nil
}

// galeraGate makes a swap back on a Galera node the gated one.
func galeraGate(opts Options, sw *cutover.Swap) {
	if opts.Cutover.Galera {
		sw.Gate, sw.Gone = table.GateName(opts.Table), table.GoneName(opts.Table)
	}
}

// swapBackFailed says what a failed swap back left: a Galera rename that had to go through late
// swapped the tables, and the kept InnoDB table has every change.
func swapBackFailed(err error, sw cutover.Swap) error {
	if swapped := (*cutover.SwappedError)(nil); errors.As(err, &swapped) {
		return outcome.New(outcome.NeedsAttention, fmt.Errorf("swapped back: %w", err),
			fmt.Sprintf("the MyISAM table is live; compare it with %s (the InnoDB table, which has every change up to the rename) and copy what is missing", sw.Aside))
	}
	return outcome.New(outcome.FailedSafe, fmt.Errorf("swap back: %w", err), "the InnoDB table is still live; retry the rollback")
}
