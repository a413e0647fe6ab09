package plan

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/table"
)

// A cluster whose nodes set no wsrep_node_incoming_address reports AUTO for each of them: none of
// them is taken for this node, each is reported as unreadable with what to do, and the table is a
// blocker for that, not for rows "on several nodes".
func TestGaleraAutoAddressesAreNotNodes(t *testing.T) {
	if s := selfAddress([]string{"AUTO", "AUTO", "AUTO"}, "AUTO", "3306"); s != "" {
		t.Fatalf("self is %q among AUTO addresses", s)
	}
	g := &Galera{Nodes: []string{"AUTO", "AUTO", "AUTO"}}
	opened := 0
	g.countRows(context.Background(), nil, func(context.Context, string) (*sql.DB, error) { opened++; return nil, errors.New("not reached") }, []candidate{{schema: "s", name: "t"}})
	if opened != 0 {
		t.Fatalf("tried to connect to AUTO %d times", opened)
	}
	rows := g.Rows["s.t"]
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if !strings.Contains(r.Err, "--node host:port") {
			t.Errorf("node %s: error %q does not say what to do", r.Node, r.Err)
		}
	}
	in := &TableInput{Server: &ServerInfo{Galera: g}, Info: &table.Info{Schema: "s", Name: "t"}}
	var blockers []string
	for _, f := range checkGaleraRows(in) {
		if f.Severity == Blocker {
			blockers = append(blockers, f.Message)
		}
	}
	if len(blockers) != 1 || !strings.Contains(blockers[0], "could not count") || strings.Contains(blockers[0], "several nodes") {
		t.Errorf("blockers %q", blockers)
	}
}
