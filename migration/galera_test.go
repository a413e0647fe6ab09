package migration

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/sandbox"
	"github.com/enginemig/enginemig/sandbox/sandboxtest"
)

// On a Galera node (here a one-node cluster, bootstrapped) apply refuses before it changes
// anything: its cut-over could wedge the node.
func TestGaleraNodeIsRefused(t *testing.T) {
	const provider = "/usr/lib/galera/libgalera_smm.so"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	groupPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	node := sandboxtest.ForFlavour(t, sandbox.MariaDB1011, sandbox.Options{ExtraArgs: []string{
		"--wsrep-on=ON", "--wsrep-provider=" + provider, "--wsrep-cluster-address=gcomm://",
		"--wsrep-cluster-name=emtest", "--wsrep-node-address=127.0.0.1",
		"--wsrep-provider-options=base_port=" + strconv.Itoa(groupPort) + ";gcache.size=16M",
		"--innodb-autoinc-lock-mode=2",
	}})
	db := openControl(t, node)
	var on string
	if err := db.QueryRow("SELECT @@wsrep_on").Scan(&on); err != nil || on != "1" {
		t.Fatalf("the sandbox is not a Galera node: wsrep_on=%q, %v", on, err)
	}
	// The server answers before the node has joined its (one-node) cluster.
	deadline := time.Now().Add(time.Minute)
	for ready := ""; ready != "ON"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the one-node cluster is not ready after a minute: wsrep_ready=%s", ready)
		}
		var name string
		if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'wsrep_ready'").Scan(&name, &ready); err != nil {
			t.Fatal(err)
		}
	}
	schema, _ := sandboxtest.FreshDatabase(t, node)
	sandboxtest.MustExec(t, db, "CREATE TABLE `"+schema+"`.t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO `"+schema+"`.t VALUES (1, 1), (2, 2)")

	opts := testOptions(node, schema, "t")
	// Without the refusal the cut-over wedges the node and Run never returns: fail instead.
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), db, opts); done <- err }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		node.Stop() // a wedged node would hold the test's own clean-up too
		t.Fatal("apply on a Galera node did not return within 2 minutes (a wedged cut-over?)")
	}
	if outcome.CodeOf(err) != outcome.Refused || !strings.Contains(err.Error(), "[galera]") || !strings.Contains(err.Error(), `cluster "emtest"`) {
		t.Fatalf("apply on a Galera node: got code %d %v, want a refusal by the galera check", outcome.CodeOf(err), err)
	}
	if engineOf(t, db, schema, "t") != "MyISAM" || tableExists(t, db, schema, "_t_new") {
		t.Fatal("a refused apply changed the table")
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", opts.StateSchema).Scan(&n)
	if n != 0 {
		t.Error("state schema created by a refused migration")
	}
}
