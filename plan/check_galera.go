package plan

import "fmt"

func init() {
	registerServer("galera", Blocker, "the server is a Galera cluster node (wsrep_on=ON): apply does not convert tables there yet, because its cut-over can wedge the node", checkGalera)
}

// checkGalera refuses on a Galera node. Galera runs DDL in total-order isolation: a DROP or RENAME
// waits until no session holds a lock on its tables, so the cut-over's DROP of the sentry (behind
// the cut-over session's own LOCK TABLES) can wait forever, and the node's applier threads cannot
// be killed. An index build on the shadow also aborts the replay's transactions (error 1213). A
// refusal is safe; a wedged node is an outage.
func checkGalera(s *ServerInfo) []Finding {
	if !s.VarOn("wsrep_on") {
		return nil
	}
	cluster := s.Var("wsrep_cluster_name")
	if cluster == "" {
		cluster = "unnamed"
	}
	return []Finding{newFinding("galera", Blocker,
		fmt.Sprintf("this server is a node of Galera cluster %q (wsrep_on=ON, wsrep_OSU_method=%s): enginemig does not convert tables on a Galera node yet; its cut-over needs DDL while holding table locks, which can leave the node waiting in total-order isolation with sessions that cannot be killed", cluster, orDash(s.Var("wsrep_osu_method"))),
		"convert the tables before the server joins a cluster, or wait for an enginemig release that supports Galera; do not work around this check (note that a plain ALTER TABLE ... ENGINE=InnoDB on a node converts only the rows that node holds: MyISAM rows are not replicated)")}
}
