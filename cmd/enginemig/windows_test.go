package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// TestWindowFlags: a bad --copy-window, --cutover-window or --window-zone is a usage error
// naming the flag and what is expected, before connecting and with nothing created; --window-zone
// server reads the server's offset and the messages say so.
func TestWindowFlags(t *testing.T) {
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM", "INSERT INTO t SELECT seq, seq FROM "+sandboxtest.Seq(2000))
	empty := filepath.Join(t.TempDir(), "my.cnf")
	os.WriteFile(empty, nil, 0o600)
	apply := []string{"apply", "--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port), "--user", "root",
		"--ssl-mode", "DISABLED", "--database", schema, "--table", "t", "--no-progress"}
	for _, c := range []struct{ args []string }{
		{[]string{"--copy-window", "Mon-Fri 25:00-06:00"}},
		{[]string{"--cutover-window", "Sat 02:00"}},
		{[]string{"--cutover-window", "Someday 02:00-04:00"}},
		{[]string{"--copy-window", "daily 01:00-05:00", "--window-zone", "Mars/Olympus"}},
	} {
		_, code, err := runCLIErr(append(append([]string{}, apply...), c.args...)...)
		flag := c.args[len(c.args)-2]
		if code != outcome.Usage || err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%v: exit %d (%v), want %d naming %s", c.args, code, err, outcome.Usage, flag)
		} else if flag != "--window-zone" && !strings.Contains(err.Error(), "HH:MM-HH:MM") {
			t.Errorf("%v: %v; want what a window looks like", c.args, err)
		}
	}
	var tables int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", schema).Scan(&tables)
	if tables != 1 || engineOfTable(db, schema, "t") != "MyISAM" {
		t.Fatalf("after the refusals: %d tables in %s, t on %s; want t alone, MyISAM", tables, schema, engineOfTable(db, schema, "t"))
	}

	var secs int
	if err := db.QueryRow("SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())").Scan(&secs); err != nil {
		t.Fatal(err)
	}
	server := time.FixedZone("server", int((time.Duration(secs)*time.Second).Round(time.Minute)/time.Second))
	opens := time.Now().In(server).Add(3 * time.Second)
	spec := opens.Format("15:04:05") + "-" + opens.Add(time.Hour).Format("15:04:05")
	out, code := runCLI(t, append(apply, "--window-zone", "server", "--copy-window", spec, "--cutover-window", "daily 00:00-24:00")...)
	if code != outcome.OK || !strings.Contains(out, "outside the window "+spec+" (server time)") {
		t.Fatalf("--window-zone server: exit %d\n%s", code, out)
	}
	if engineOfTable(db, schema, "t") != "InnoDB" {
		t.Fatal("t not converted")
	}
}
