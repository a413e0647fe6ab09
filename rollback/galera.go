package rollback

// errGaleraRollback is why rollback refuses on a Galera node. After the swap the InnoDB table is
// the cluster's: every node's application may write it, and those writes reach this node as
// replicated events. A rollback's lock on this node does not hold the other nodes' writers, its
// capture sees their changes only with log_slave_updates, and the MyISAM original it swaps back
// holds rows on this node only, so a swap back would lose every write made on the other nodes
// since the cut-over.
const errGaleraRollback = "rollback refuses on a Galera node: the converted table is replicated and written on every node, and swapping the MyISAM original back (whose rows live on this node only) would lose the writes made on the other nodes since the cut-over"

const galeraRollbackRemedy = "keep the InnoDB table; to undo by hand, stop the application's writes on every node, copy the InnoDB table's rows into the kept original (" +
	"INSERT ... SELECT), and rename the two tables in one RENAME TABLE"
