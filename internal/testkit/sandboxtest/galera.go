package sandboxtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
)

// GaleraProvider is Debian's galera-4 library (a dependency of its mariadb-server).
const GaleraProvider = "/usr/lib/galera/libgalera_smm.so"

// Cluster is a MariaDB Galera cluster of sandbox servers on 127.0.0.1, each node with its own
// SQL, group (base_port), IST and SST ports. The first node bootstraps; the others join it one
// after the other by rsync SST.
type Cluster struct {
	Name  string
	Nodes []*sandbox.Server
	// Started is how long the cluster took to have every node synced.
	Started time.Duration
	groups  []int
	joined  []time.Duration
}

// clusterTimeout bounds the start of a whole cluster (each joiner copies the donor's datadir).
const clusterTimeout = 3 * time.Minute

// ClusterForTest starts an n-node cluster for one test (and its subtests) and stops it when the
// test ends. It fails, never skips, when galera-4 is missing: CI installs it.
func ClusterForTest(tb testing.TB, n int) *Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	c, err := StartCluster(ctx, n, "emtest")
	if err != nil {
		tb.Fatalf("start a %d-node Galera cluster: %v", n, err)
	}
	tb.Cleanup(c.Stop)
	tb.Logf("Galera cluster of %d nodes synced in %s", n, c.Started.Round(time.Millisecond))
	return c
}

// StartCluster starts an n-node cluster named name and returns once every node is synced.
func StartCluster(ctx context.Context, n int, name string) (*Cluster, error) {
	if _, err := os.Stat(GaleraProvider); err != nil {
		return nil, fmt.Errorf("%s not found: install galera-4 (Debian: apt-get install -y galera-4 rsync)", GaleraProvider)
	}
	begin := time.Now()
	c := &Cluster{Name: name}
	for i := 0; i < n; i++ {
		if err := c.join(ctx, i); err != nil {
			c.Stop()
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	c.Started = time.Since(begin)
	return c, nil
}

// join starts node i: the first bootstraps the cluster, the others join the nodes before them.
func (c *Cluster) join(ctx context.Context, i int) error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	group, ist, sst, port := ports[0], ports[1], ports[2], ports[3]
	address := "gcomm://"
	if i > 0 {
		var peers []string
		for _, g := range c.groups {
			peers = append(peers, "127.0.0.1:"+strconv.Itoa(g))
		}
		address += strings.Join(peers, ",")
	}
	opts := sandbox.Options{
		ServerID: i + 1,
		Port:     port,
		Prepare:  sstWritable,
		ExtraArgs: []string{
			"--wsrep-on=ON", "--wsrep-provider=" + GaleraProvider,
			"--wsrep-cluster-name=" + c.Name, "--wsrep-cluster-address=" + address,
			"--wsrep-node-name=node" + strconv.Itoa(i+1), "--wsrep-node-address=127.0.0.1",
			fmt.Sprintf("--wsrep-node-incoming-address=127.0.0.1:%d", port),
			fmt.Sprintf("--wsrep-provider-options=base_port=%d;ist.recv_addr=127.0.0.1:%d;gcache.size=16M;gmcast.listen_addr=tcp://127.0.0.1:%d", group, ist, group),
			"--wsrep-sst-method=rsync", fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", sst),
			"--innodb-autoinc-lock-mode=2", "--innodb-buffer-pool-size=64M",
		},
	}
	begin := time.Now()
	s, err := sandbox.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() { c.joined = append(c.joined, time.Since(begin)) }()
	c.Nodes = append(c.Nodes, s)
	c.groups = append(c.groups, group)
	db, err := s.Open("")
	if err != nil {
		return err
	}
	defer db.Close()
	if err := WaitSynced(ctx, db, i+1); err != nil {
		return fmt.Errorf("%w\n%s", err, errorLogTail(s, 30))
	}
	return nil
}

// errorLogTail is the end of a node's error log (MariaDB names it after --log-basename).
func errorLogTail(s *sandbox.Server, n int) string {
	logs, _ := filepath.Glob(filepath.Join(s.Dir, "data", "*.err"))
	if len(logs) == 0 {
		return s.ErrorLogTail(n)
	}
	b, _ := os.ReadFile(logs[0])
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// sstWritable opens a node's datadir to the rsync daemon of an SST, which drops to nobody.
func sstWritable(dir string) error {
	return filepath.Walk(filepath.Join(dir, "data"), func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o666)
		if info.IsDir() {
			mode = 0o777
		}
		return os.Chmod(p, mode)
	})
}

// WaitSynced waits until the node behind db is ready and synced in a cluster of size nodes.
func WaitSynced(ctx context.Context, db *sql.DB, size int) error {
	var last string
	for {
		st, err := WsrepStatus(ctx, db)
		if err == nil && st["wsrep_ready"] == "ON" && st["wsrep_local_state_comment"] == "Synced" &&
			st["wsrep_cluster_size"] == strconv.Itoa(size) && st["wsrep_cluster_status"] == "Primary" {
			return nil
		}
		last = fmt.Sprintf("ready=%s state=%s size=%s status=%s (%v)", st["wsrep_ready"], st["wsrep_local_state_comment"],
			st["wsrep_cluster_size"], st["wsrep_cluster_status"], err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("not synced in a cluster of %d: %s: %w", size, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WsrepStatus reads the node's wsrep_% status variables.
func WsrepStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep%'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		st[strings.ToLower(k)] = v
	}
	return st, rows.Err()
}

// Stop shuts the joiners down first, then the node that bootstrapped the cluster.
func (c *Cluster) Stop() {
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		c.Nodes[i].Stop()
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
