package plan

import (
	"strings"
	"testing"
)

// A rollback on Galera replays the node's binlog, which must hold the other nodes' write sets:
// MariaDB writes them there whatever log_slave_updates says, other wsrep servers only with it.
func TestGaleraRollbackNeedsAppliedWriteSetsInTheBinlog(t *testing.T) {
	for _, c := range []struct {
		version string
		binlogs bool
		warned  bool
	}{{"10.11.6-MariaDB", true, false}, {"8.0.36-28.1", false, true}, {"8.0.36-28.1", true, false}} {
		s := server(c.version, map[string]string{"wsrep_on": "ON"})
		s.Galera = &Galera{Status: "Primary", State: "Synced", OSUMethod: "TOI", BinlogsWriteSets: c.binlogs}
		var warned bool
		for _, f := range checkGaleraCluster(s) {
			if f.Severity == Warning && strings.Contains(f.Message, "log_slave_updates") {
				warned = true
			}
		}
		if warned != c.warned {
			t.Errorf("%s, write sets in the binlog %v: warned %v, want %v", c.version, c.binlogs, warned, c.warned)
		}
	}
}
