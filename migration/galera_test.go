package migration

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/plan"
	"github.com/enginemig/enginemig/sandbox"
	"github.com/enginemig/enginemig/sandbox/sandboxtest"
)

// TestGalera runs every Galera case on one 3-node cluster (its start is most of the cost).
func TestGalera(t *testing.T) {
	c := sandboxtest.ClusterForTest(t, 3)
	t.Run("plan", func(t *testing.T) { galeraPlan(t, c) })
	t.Run("refused", func(t *testing.T) { galeraRefused(t, c.Nodes[0]) })
}

// galeraPlan: plan on a node says who holds the rows of each MyISAM table, where to run apply,
// and blocks where the rows are elsewhere or spread over several nodes.
func galeraPlan(t *testing.T, c *sandboxtest.Cluster) {
	schema, _ := sandboxtest.FreshDatabase(t, c.Nodes[0])
	dbs := make([]*sql.DB, len(c.Nodes))
	for i, n := range c.Nodes {
		dbs[i] = openControl(t, n)
	}
	sandboxtest.MustExec(t, dbs[0],
		"CREATE TABLE `"+schema+"`.here (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"CREATE TABLE `"+schema+"`.spread (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO `"+schema+"`.here VALUES (1, 1), (2, 2), (3, 3)",
		"INSERT INTO `"+schema+"`.spread VALUES (1, 1)")
	waitTable(t, dbs[2], schema, "spread") // the CREATEs reach the other nodes, the rows do not
	sandboxtest.MustExec(t, dbs[1], "INSERT INTO `"+schema+"`.spread VALUES (2, 2)")

	inspect := func(db *sql.DB) *plan.Plan {
		t.Helper()
		p, err := plan.Inspect(context.Background(), db, plan.Options{Databases: []string{schema}, OpenNode: func(ctx context.Context, addr string) (*sql.DB, error) {
			for _, n := range c.Nodes {
				if strings.HasSuffix(addr, ":"+strconv.Itoa(n.Port)) {
					return n.Open("")
				}
			}
			t.Errorf("plan asked for node %s, which is not in the cluster", addr)
			return nil, sql.ErrConnDone
		}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := inspect(dbs[0])
	g := p.Server.Galera
	if g == nil || g.Size != 3 || g.Status != "Primary" || g.State != "Synced" || len(g.Nodes) != 3 || g.Self != "127.0.0.1:"+strconv.Itoa(c.Nodes[0].Port) || g.OSUMethod != "TOI" {
		t.Fatalf("plan's view of the cluster: %+v", g)
	}
	var text strings.Builder
	plan.WriteText(&text, p)
	t.Log(text.String())
	here, _ := p.Table(schema, "here")
	spread, _ := p.Table(schema, "spread")
	if f := findingsOf(here.Findings, "galera-rows"); len(f) != 1 || f[0].Severity != plan.Info || !strings.Contains(f[0].Message, "(3) are on this node") {
		t.Errorf("rows on this node only: %+v", f)
	}
	if f := findingsOf(spread.Findings, "galera-rows"); len(f) != 1 || f[0].Severity != plan.Blocker || !strings.Contains(f[0].Message, "several nodes") {
		t.Errorf("rows on two nodes: %+v", f)
	}
	if !strings.Contains(text.String(), "here on each node: 127.0.0.1:"+strconv.Itoa(c.Nodes[0].Port)+": 3 rows MyISAM") {
		t.Error("the report does not list the rows per node")
	}
	// On a node without the rows, plan points at the node that has them.
	p = inspect(dbs[2])
	here, _ = p.Table(schema, "here")
	if f := findingsOf(here.Findings, "galera-rows"); len(f) != 1 || f[0].Severity != plan.Blocker || !strings.Contains(f[0].Message, "on another node (127.0.0.1:"+strconv.Itoa(c.Nodes[0].Port)) {
		t.Errorf("rows on another node: %+v", f)
	}
}

func findingsOf(fs []plan.Finding, id string) []plan.Finding {
	var out []plan.Finding
	for _, f := range fs {
		if f.Check == id {
			out = append(out, f)
		}
	}
	return out
}

// waitTable waits until a replicated CREATE TABLE has reached the node behind db.
func waitTable(t *testing.T, db *sql.DB, schema, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !tableExists(t, db, schema, name); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s.%s did not reach the node", schema, name)
		}
	}
}

// galeraRefused: apply refuses before it changes anything.
func galeraRefused(t *testing.T, node *sandbox.Server) {
	db := openControl(t, node)
	schema, _ := sandboxtest.FreshDatabase(t, node)
	sandboxtest.MustExec(t, db, "CREATE TABLE `"+schema+"`.t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO `"+schema+"`.t VALUES (1, 1), (2, 2)")

	opts := testOptions(node, schema, "t")
	// Without the refusal the cut-over wedges the node and Run never returns: fail instead.
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), db, opts); done <- err }()
	var err error
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
