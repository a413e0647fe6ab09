package plan

import (
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

func init() {
	registerServer("galera", Info, "the server is a Galera cluster node (wsrep_on=ON): how apply converts there", checkGalera)
	registerServer("galera-cluster", Blocker, "on a Galera node: the cluster's state and the settings a conversion depends on (OSU method, write-set limits, flow control, PXC strict mode, MyISAM replication)", checkGaleraCluster)
	registerTable("galera-rows", Blocker, "on a Galera node: which nodes hold the table's MyISAM rows (Galera does not replicate them), so where apply must run", checkGaleraRows)
	registerTable("galera-capture", Blocker, "on a Galera node: with trigger capture, tables whose rows it cannot keep equal there (no usable key, a unique secondary index); with binlog capture, a table without a usable key when the account cannot create the temporary table its copy chunks go through", checkGaleraCapture)
}

// checkGalera says how apply converts on a Galera node. Galera runs DDL in total-order isolation
// (TOI): a DDL waits until no session holds a lock on its tables, and it cannot be killed, so the
// usual cut-over (the sentry's DROP behind its own LOCK TABLES) can wedge a node. On a Galera node
// apply uses its Galera cut-over (docs/how-it-works/galera.md, "The cut-over on Galera"), with
// either capture: trigger capture's syncs there hold only MyISAM tables while others write the
// shadow.
func checkGalera(s *ServerInfo) []Finding {
	if !s.VarOn("wsrep_on") {
		return nil
	}
	cluster := s.Var("wsrep_cluster_name")
	if cluster == "" {
		cluster = "unnamed"
	}
	capture := "binlog capture"
	if mode, _, err := ChooseCapture(s, s.WantCapture); err == nil && mode == CaptureTriggers {
		capture = "trigger capture (its syncs lock only the MyISAM table and its change log; another session writes the shadow, and a sync whose writes wait gives its lock up)"
	}
	return []Finding{newFinding("galera", Info,
		fmt.Sprintf("this server is a node of Galera cluster %q (wsrep_OSU_method=%s): apply captures with %s, builds the shadow with all its indexes (no index build in TOI after the copy) and swaps with the Galera cut-over, which never runs DDL behind a lock of its own; the application must write the table on the node apply runs on (writes to the MyISAM table on other nodes stay there and are moved aside by the swap)", cluster, orDash(s.Var("wsrep_osu_method")), capture), "")}
}

// checkGaleraCapture refuses, with trigger capture on a Galera node, the tables it cannot keep
// equal there. The shadow has every index from the start (migration/galera.go): trigger capture's
// copy writes INSERT IGNORE (shadow/order.go, rule 3), which keeps an out-of-date row holding a
// unique value instead of the chunk's; and a table without a usable key is synced in groups under
// a lock on the shadow, which a Galera node must not hold while it commits. With binlog capture it
// refuses a table without a usable key whose copy cannot go through a temporary table
// (galeraKeylessStage).
func checkGaleraCapture(in *TableInput) []Finding {
	if in.Server.Galera == nil || len(in.Info.Columns) == 0 {
		return nil
	}
	mode, _, err := ChooseCapture(in.Server, in.Server.WantCapture)
	switch {
	case err != nil:
		return nil
	case mode == CaptureTriggers:
		return galeraTriggerCapture(in.Info)
	}
	return galeraKeylessStage(in)
}

// galeraKeylessStage blocks a table without a usable key on a Galera node when the account cannot
// create a temporary table: each of its copy chunks is read into one under the source's lock and
// written to the shadow after the lock is let go (copier.Config.WriteApart); written under the
// lock, a DDL ordered meanwhile wedges the node.
func galeraKeylessStage(in *TableInput) []Finding {
	g, schema := in.Server.Grants, in.Info.Schema
	if _, ok := in.Info.CopyKey(); ok || g == nil || g.Has("CREATE TEMPORARY TABLES", schema, "") {
		return nil
	}
	return []Finding{newFinding("galera-capture", Blocker,
		fmt.Sprintf("the table has no usable key and account %s lacks CREATE TEMPORARY TABLES on %s: on a Galera node each copy chunk of such a table is read into a temporary table under the table's lock and written to the shadow after it (a chunk writing under the lock wedges the node when a DDL is ordered meanwhile)", in.Server.User, dbconn.QuoteIdent(schema)),
		fmt.Sprintf("GRANT CREATE TEMPORARY TABLES ON %s.* TO <enginemig account>", dbconn.QuoteIdent(schema)))}
}

// galeraTriggerCapture is checkGaleraCapture's verdict on a table apply captures with triggers on
// a Galera node.
func galeraTriggerCapture(ti *table.Info) []Finding {
	const remedy = "enable the binary log on this node (log_bin, binlog_format=ROW, binlog_row_image=FULL; needs a restart) and convert with --capture binlog"
	key, ok := ti.CopyKey()
	if !ok {
		return []Finding{newFinding("galera-capture", Blocker, "the table has no usable key: on a Galera node trigger capture cannot keep a table without one equal (its syncs would lock the shadow while they commit through the cluster)", remedy)}
	}
	for _, ix := range ti.Indexes {
		if ix.Unique && ix.Name != key.Name {
			return []Finding{newFinding("galera-capture", Blocker, fmt.Sprintf("unique index `%s`: on a Galera node the shadow has it from the start, and trigger capture's copy (INSERT IGNORE) would keep an out-of-date row holding a unique value rather than the copied one", ix.Name), remedy)}
		}
	}
	return nil
}

// checkGaleraCluster reports the cluster's state and the settings that make a conversion on it
// unsafe (blockers) or shape it (info).
func checkGaleraCluster(s *ServerInfo) []Finding {
	g := s.Galera
	if g == nil {
		return nil
	}
	var out []Finding
	add := func(sev Severity, msg, remedy string) {
		out = append(out, newFinding("galera-cluster", sev, msg, remedy))
	}
	if g.Status != "Primary" || g.State != "Synced" {
		add(Blocker, fmt.Sprintf("this node is %s in a %s component of %d node(s): a conversion needs a synced node of the primary component", orDash(g.State), orDash(g.Status), g.Size),
			"wait until the node is Synced (SHOW STATUS LIKE 'wsrep_local_state_comment') in the primary component, then plan again")
	}
	if !strings.EqualFold(g.OSUMethod, "TOI") {
		add(Blocker, fmt.Sprintf("wsrep_OSU_method=%s: DDL runs on this node only, so the InnoDB shadow and the swap would not reach the other nodes", orDash(g.OSUMethod)),
			"SET GLOBAL wsrep_OSU_method='TOI' (the default) for the conversion")
	}
	if m := strings.ToUpper(g.StrictMode); m == "ENFORCING" || m == "MASTER" {
		add(Blocker, fmt.Sprintf("pxc_strict_mode=%s refuses DML on MyISAM tables and LOCK TABLES, which the copy and the cut-over need", g.StrictMode),
			"SET GLOBAL pxc_strict_mode=PERMISSIVE for the conversion and back to ENFORCING afterwards")
	}
	if g.ReplicateMyISAM {
		add(Blocker, "MyISAM replication is on (wsrep_mode=REPLICATE_MYISAM or wsrep_replicate_myisam=ON): writes to the MyISAM table reach the other nodes outside the copy's order, which enginemig does not handle",
			"turn MyISAM replication off for the conversion (SET GLOBAL wsrep_mode without REPLICATE_MYISAM)")
	}
	if !g.BinlogsWriteSets {
		add(Warning, "log_slave_updates is OFF: this node's binlog lacks the writes the other nodes make, so a rollback of a conversion made here will be refused (after the swap the InnoDB table is written on every node, and a rollback must carry those writes into the MyISAM table)",
			"set log_slave_updates=ON in this node's configuration and restart it before apply, if a rollback must stay possible")
	}
	add(Info, fmt.Sprintf("write-set limits: wsrep_max_ws_rows=%d, wsrep_max_ws_size=%d bytes; each copy chunk and replay batch is one write set and must stay below both (0 rows means no row limit)", g.MaxWSRows, g.MaxWSSize), "")
	add(Info, fmt.Sprintf("flow control: gcs.fc_limit=%s, paused %.3f of the time since the status was last read, receive queue %d; the cluster's slowest node paces every writer, the copy included", orDash(g.FCLimit), g.FCPaused, g.RecvQueue), "")
	return out
}

// checkGaleraRows says which nodes hold the table's rows: only the node apply runs on is copied,
// and the swap, replicated to every node, moves each node's own MyISAM copy aside.
func checkGaleraRows(in *TableInput) []Finding {
	g := in.Server.Galera
	if g == nil {
		return nil
	}
	rows := g.Rows[in.Info.Schema+"."+in.Info.Name]
	var holders, unread, empty []string
	selfRows := int64(0)
	for _, r := range rows {
		switch {
		case r.Err != "":
			unread = append(unread, fmt.Sprintf("%s (%s)", r.Node, r.Err))
		case r.Rows > 0:
			holders = append(holders, fmt.Sprintf("%s: %d rows", r.Node, r.Rows))
			if r.Node == g.Self {
				selfRows = r.Rows
			}
		default:
			empty = append(empty, r.Node)
		}
	}
	var out []Finding
	if len(in.Info.Columns) > 0 && !hasPrimaryKey(in.Info) {
		out = append(out, newFinding("galera-rows", Info, "the table has no PRIMARY KEY: Galera certifies and applies rows of an InnoDB table without one poorly (every node searches for each changed row); whether apply can convert it at all is the no-usable-key check's", ""))
	}
	if len(unread) > 0 {
		out = append(out, newFinding("galera-rows", Blocker, "could not count the table's rows on node(s) "+strings.Join(unread, ", ")+": rows there would be left behind",
			"let this account connect to every node, or name the nodes' SQL addresses with --node host:port"))
	}
	switch {
	case len(holders) > 1:
		out = append(out, newFinding("galera-rows", Blocker, "the table's MyISAM rows are on several nodes ("+strings.Join(holders, ", ")+"): a conversion copies one node's rows into the cluster's InnoDB table, and the swap moves every other node's rows aside",
			"merge the rows into one node first (for example mysqldump --no-create-info --insert-ignore on the others, loaded on the holder, then emptied there), then plan again"))
	case len(holders) == 1 && selfRows == 0:
		out = append(out, newFinding("galera-rows", Blocker, "the table's rows are on another node ("+holders[0]+"), not on this one",
			"run plan and apply on that node: apply copies the rows of the node it runs on"))
	case len(holders) == 1:
		out = append(out, newFinding("galera-rows", Info, fmt.Sprintf("the rows (%d) are on this node (%s) only: run apply here; node(s) %s receive the InnoDB rows through replication", selfRows, g.Self, orDash(strings.Join(empty, ", "))), ""))
	}
	return out
}

func hasPrimaryKey(t *table.Info) bool {
	for _, ix := range t.Indexes {
		if ix.Name == "PRIMARY" {
			return true
		}
	}
	return false
}
