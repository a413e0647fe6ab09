package migration

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// The copy runs two chunks at once only where InnoDB lets them run side by side (copyWorkers):
// always for a key without AUTO_INCREMENT; with one, on MySQL with innodb_autoinc_lock_mode=2
// (its default) but never on MariaDB. --copy-workers overrides the choice.
func TestCopyWorkersFollowTheServer(t *testing.T) {
	schema, sdb := sandboxtest.FreshDatabase(t, srv)
	db := openControl(t, srv)
	sandboxtest.MustExec(t, sdb,
		"CREATE TABLE plain (id INT NOT NULL PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO plain SELECT seq, seq FROM "+sandboxtest.Seq(5000),
		"CREATE TABLE counted (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=MyISAM",
		"INSERT INTO counted SELECT seq, seq FROM "+sandboxtest.Seq(5000),
		"CREATE TABLE forced LIKE counted", "INSERT INTO forced SELECT * FROM counted")
	autoincWorkers := "1"
	if srv.Flavour().MySQL() {
		autoincWorkers = "2"
	}
	for _, c := range []struct {
		table, want string
		force       int
	}{{"plain", "2", 0}, {"counted", autoincWorkers, 0}, {"forced", "3", 3}} {
		logs := &logLines{}
		opts := testOptions(srv, schema, c.table)
		opts.Logger, opts.CopyWorkers = logs.logger(), c.force
		res, err := Run(context.Background(), db, opts)
		if err != nil {
			t.Fatalf("%s: %v", c.table, err)
		}
		if got := strconv.Itoa(res.CopyWorkers); got != c.want || !strings.Contains(logs.String(), "workers="+c.want) {
			t.Errorf("%s: copy_workers %s, want %s (also in the log):\n%s", c.table, got, c.want, logs.String())
		}
		if said := strings.Contains(logs.String(), "copying one chunk at a time"); said != (c.want == "1") {
			t.Errorf("%s: the log says why one worker: %v, want %v", c.table, said, c.want == "1")
		}
		if diff := sameRows(t, db, schema, c.table, "_"+c.table+"_old", []string{"id", "v"}, "id"); diff != "" {
			t.Errorf("%s: %s", c.table, diff)
		}
	}
}
