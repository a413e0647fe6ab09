package plan

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Galera is what plan reads of a Galera node (wsrep_on=ON) and its cluster. MyISAM rows are not
// replicated by Galera (only the CREATE TABLE is), so each node may hold different rows of the same
// MyISAM table: Rows says who holds what.
type Galera struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"` // wsrep_node_name
	Size    int    `json:"cluster_size"`
	Status  string `json:"cluster_status"` // Primary, or non-Primary when the node lost quorum
	State   string `json:"local_state"`    // Synced, Donor/Desynced, Joining ...
	// Nodes are the SQL addresses of the cluster's nodes (wsrep_incoming_addresses, or --node);
	// Self is this node's among them ("" when it cannot be told).
	Nodes []string `json:"nodes"`
	Self  string   `json:"self,omitempty"`
	// The settings that decide whether and how a table can be converted on the cluster.
	OSUMethod       string  `json:"osu_method"`
	MaxWSRows       int64   `json:"max_ws_rows"`
	MaxWSSize       int64   `json:"max_ws_size"`
	FCLimit         string  `json:"fc_limit,omitempty"` // gcs.fc_limit of wsrep_provider_options
	FCPaused        float64 `json:"flow_control_paused"`
	RecvQueue       int64   `json:"local_recv_queue"`
	StrictMode      string  `json:"pxc_strict_mode,omitempty"` // Percona XtraDB Cluster only
	ReplicateMyISAM bool    `json:"replicate_myisam"`
	// BinlogsWriteSets: the write sets applied from other nodes reach this node's binlog, which a
	// rollback replays (MariaDB writes them whatever log_slave_updates says; other wsrep servers
	// only with it).
	BinlogsWriteSets bool `json:"binlogs_write_sets"`
	// Rows maps "schema.table" to the table's rows on each node, in Nodes order.
	Rows map[string][]NodeRows `json:"rows,omitempty"`
}

// NodeRows is one node's copy of a table.
type NodeRows struct {
	Node   string `json:"node"`
	Engine string `json:"engine,omitempty"` // "" when the table does not exist there
	Rows   int64  `json:"rows"`
	Err    string `json:"error,omitempty"` // the node could not be read
}

// BinlogsWriteSets says whether a Galera node writes the write sets it applies from other nodes to
// its binlog: MariaDB does whatever log_slave_updates says (measured on 10.11, see
// docs/how-it-works/rollback.md, "Rollback on Galera"); other wsrep servers only with
// log_slave_updates.
func BinlogsWriteSets(mariaDB bool, logSlaveUpdates string) bool {
	return mariaDB || strings.EqualFold(logSlaveUpdates, "ON") || logSlaveUpdates == "1"
}

// galeraVariables are read only on a Galera node (absent ones stay empty).
var galeraVariables = []string{"wsrep_node_name", "wsrep_max_ws_rows", "wsrep_max_ws_size", "wsrep_provider_options",
	"pxc_strict_mode", "wsrep_mode", "wsrep_replicate_myisam", "wsrep_node_incoming_address", "port", "log_slave_updates"}

var fcLimitRe = regexp.MustCompile(`gcs\.fc_limit\s*=\s*([^;]+)`)

// loadGalera reads the node's cluster state and settings; nodes, when given, replace the
// addresses the cluster reports.
func loadGalera(ctx context.Context, q Querier, s *ServerInfo, nodes []string) (*Galera, error) {
	vars := map[string]string{}
	if err := readNameValues(ctx, q, "SHOW GLOBAL VARIABLES WHERE Variable_name IN "+inList(galeraVariables), func(k, v string) {
		vars[strings.ToLower(k)] = v
	}); err != nil {
		return nil, fmt.Errorf("read wsrep variables: %w", err)
	}
	st := map[string]string{}
	if err := readNameValues(ctx, q, "SHOW GLOBAL STATUS LIKE 'wsrep%'", func(k, v string) { st[strings.ToLower(k)] = v }); err != nil {
		return nil, fmt.Errorf("read wsrep status: %w", err)
	}
	g := &Galera{Cluster: s.Var("wsrep_cluster_name"), Node: vars["wsrep_node_name"], Status: st["wsrep_cluster_status"],
		State: st["wsrep_local_state_comment"], OSUMethod: s.Var("wsrep_osu_method"), StrictMode: vars["pxc_strict_mode"]}
	g.Size, _ = strconv.Atoi(st["wsrep_cluster_size"])
	g.MaxWSRows, _ = strconv.ParseInt(vars["wsrep_max_ws_rows"], 10, 64)
	g.MaxWSSize, _ = strconv.ParseInt(vars["wsrep_max_ws_size"], 10, 64)
	g.FCPaused, _ = strconv.ParseFloat(st["wsrep_flow_control_paused"], 64)
	g.RecvQueue, _ = strconv.ParseInt(st["wsrep_local_recv_queue"], 10, 64)
	if m := fcLimitRe.FindStringSubmatch(vars["wsrep_provider_options"]); m != nil {
		g.FCLimit = strings.TrimSpace(m[1])
	}
	g.BinlogsWriteSets = BinlogsWriteSets(s.MariaDB(), vars["log_slave_updates"])
	g.ReplicateMyISAM = strings.Contains(strings.ToUpper(vars["wsrep_mode"]), "REPLICATE_MYISAM") ||
		strings.EqualFold(vars["wsrep_replicate_myisam"], "ON")
	g.Nodes = nodes
	if len(g.Nodes) == 0 {
		for _, a := range strings.Split(st["wsrep_incoming_addresses"], ",") {
			if a = strings.TrimSpace(a); a != "" {
				g.Nodes = append(g.Nodes, a)
			}
		}
	}
	g.Self = selfAddress(g.Nodes, vars["wsrep_node_incoming_address"], vars["port"])
	// wsrep_incoming_addresses lists the nodes in an order that differs between nodes and over
	// time; the report lists this node first, then the others as the cluster gave them.
	if i := slices.Index(g.Nodes, g.Self); i > 0 {
		g.Nodes = slices.Insert(slices.Delete(g.Nodes, i, i+1), 0, g.Self)
	}
	return g, nil
}

// selfAddress picks this node among the addresses: its own incoming address, or else the only
// address with its port.
func selfAddress(nodes []string, incoming, port string) string {
	var byPort []string
	for _, n := range nodes {
		if n == incoming && nodeAddress(n) == nil {
			return n
		}
		if _, p, err := net.SplitHostPort(n); err == nil && p == port {
			byPort = append(byPort, n)
		}
	}
	if len(byPort) == 1 {
		return byPort[0]
	}
	return ""
}

// nodeAddress says why a node address the cluster reported cannot be connected to: a node without
// wsrep_node_incoming_address set reports "AUTO" (every such node alike), which is no address; it
// must not be taken for this node, nor for another.
func nodeAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("the cluster reports %q for this node, not a host:port enginemig can connect to (set wsrep_node_incoming_address on each node, or name every node with --node host:port)", addr)
	}
	return nil
}

// NodeOpener connects to another node of the cluster with the credentials plan was given.
type NodeOpener func(ctx context.Context, addr string) (*sql.DB, error)

// OpenWithAccount connects to another node with the account and TLS settings of c.
func OpenWithAccount(c dbconn.Config) NodeOpener {
	return func(ctx context.Context, addr string) (*sql.DB, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("node address %q: %w", addr, err)
		}
		node := c
		node.Socket, node.Host = "", host
		if node.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("node address %q: %w", addr, err)
		}
		return dbconn.Open(ctx, node, "", 1)
	}
}

// countRows reads each planned table's engine and rows on every node: on this one through q, on
// the others through open. COUNT(*) of a MyISAM table is read from its header, not scanned.
func (g *Galera) countRows(ctx context.Context, q Querier, open NodeOpener, cands []candidate) {
	g.Rows = map[string][]NodeRows{}
	for _, node := range g.Nodes {
		var nq Querier = q
		var err error
		if node != g.Self {
			var db *sql.DB
			if aerr := nodeAddress(node); aerr != nil {
				err = aerr
			} else if open == nil {
				err = fmt.Errorf("no way to connect to other nodes")
			} else if db, err = open(ctx, node); err == nil {
				defer db.Close()
				nq = db
			}
		}
		for _, c := range cands {
			key := c.schema + "." + c.name
			r := NodeRows{Node: node}
			if err != nil {
				r.Err = err.Error()
			} else {
				r.Engine, r.Rows, r.Err = nodeTable(ctx, nq, c.schema, c.name)
			}
			g.Rows[key] = append(g.Rows[key], r)
		}
	}
}

func nodeTable(ctx context.Context, q Querier, schema, name string) (string, int64, string) {
	var engine sql.NullString
	err := q.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&engine)
	if err == sql.ErrNoRows {
		return "", 0, ""
	}
	if err != nil {
		return "", 0, err.Error()
	}
	var n int64
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+dbconn.QualifiedName(schema, name)).Scan(&n); err != nil {
		return engine.String, 0, err.Error()
	}
	return engine.String, n, ""
}

// writeGalera prints the cluster and who holds which rows.
func writeGalera(b *strings.Builder, p *Plan) {
	g := p.Server.Galera
	if g == nil {
		return
	}
	fmt.Fprintf(b, "\nGalera cluster %q: %d node(s), %s; this node %s (%s) is %s.\n", g.Cluster, g.Size, orDash(g.Status),
		orDash(g.Node), orDash(g.Self), orDash(g.State))
	fmt.Fprintf(b, "  wsrep_OSU_method=%s wsrep_max_ws_rows=%d wsrep_max_ws_size=%d gcs.fc_limit=%s flow control paused %.3f, receive queue %d",
		orDash(g.OSUMethod), g.MaxWSRows, g.MaxWSSize, orDash(g.FCLimit), g.FCPaused, g.RecvQueue)
	if g.StrictMode != "" {
		fmt.Fprintf(b, ", pxc_strict_mode=%s", g.StrictMode)
	}
	b.WriteString("\n")
	for _, t := range p.Tables {
		var parts []string
		for _, r := range g.Rows[t.Schema+"."+t.Table] {
			switch {
			case r.Err != "":
				parts = append(parts, fmt.Sprintf("%s: unread (%s)", r.Node, clip(r.Err, 80)))
			case r.Engine == "":
				parts = append(parts, r.Node+": no such table")
			default:
				parts = append(parts, fmt.Sprintf("%s: %d rows %s", r.Node, r.Rows, r.Engine))
			}
		}
		fmt.Fprintf(b, "  %s.%s on each node: %s\n", t.Schema, t.Table, strings.Join(parts, ", "))
	}
}

// LoadGalera reads the cluster's state and settings as seen from the node db is connected to; nil
// when it is not a Galera node.
func LoadGalera(ctx context.Context, db *sql.DB) (*Galera, error) {
	srv, err := LoadServer(ctx, db)
	if err != nil || !srv.VarOn("wsrep_on") {
		return nil, err
	}
	return loadGalera(ctx, db, srv, nil)
}

// CheckGalera runs the Galera checks for one table as apply's preflight does: the cluster's state
// and settings, the table's rows on every node (read through open), and whether the capture apply
// chose (capture: "binlog" or "triggers") can keep the table equal there. server is the server as
// CheckServer read it (its variables, status and grants; nil: read them now); the cluster's own
// state is read afresh. It returns nothing on a server that is not a Galera node.
func CheckGalera(ctx context.Context, db *sql.DB, server *ServerInfo, ti *table.Info, capture string, nodes []string, open NodeOpener) ([]Finding, error) {
	if server == nil {
		var err error
		if server, err = LoadServer(ctx, db); err != nil {
			return nil, err
		}
	}
	if !server.VarOn("wsrep_on") {
		return nil, nil
	}
	srv := *server // its Galera part and capture are this check's
	var err error
	if srv.Galera, err = loadGalera(ctx, db, &srv, nodes); err != nil {
		return nil, err
	}
	srv.WantCapture = capture
	srv.Galera.countRows(ctx, db, open, []candidate{{schema: ti.Schema, name: ti.Name}})
	in := &TableInput{Info: ti, Server: &srv}
	return append(append(checkGaleraCluster(&srv), checkGaleraRows(in)...), checkGaleraCapture(in)...), nil
}
