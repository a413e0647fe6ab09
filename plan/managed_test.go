package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// A server with Amazon RDS's configuration procedures (here stand-ins with the documented names
// and result: no RDS server runs here) is recognised, and binlog capture on it with the
// binlog's retention unset gets the CALL that sets it; set to a week, nothing is said.
func TestManagedBinlogRetention(t *testing.T) {
	rds := sandboxtest.ForTest(t, sandbox.Options{})
	_, db := sandboxtest.FreshDatabase(t, rds)
	sandboxtest.MustExec(t, db, "CREATE TABLE mysql.rds_configuration (name VARCHAR(100) PRIMARY KEY, value VARCHAR(100), description VARCHAR(300))",
		"INSERT INTO mysql.rds_configuration VALUES ('binlog retention hours', NULL, 'binlog retention hours specifies the duration in hours before binary logs are automatically deleted.')",
		"CREATE PROCEDURE mysql.rds_show_configuration() SELECT name, value, description FROM mysql.rds_configuration",
		"CREATE PROCEDURE mysql.rds_set_configuration(IN n VARCHAR(100), IN v INT) UPDATE mysql.rds_configuration SET value = v WHERE name = n")
	check := func() (Finding, bool) {
		_, fs, err := CheckServer(context.Background(), db, CaptureAuto, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return hasCheck(fs, "managed-binlog-retention")
	}
	f, ok := check()
	if !ok || f.Severity != Warning || !strings.Contains(f.Message, "Amazon RDS") || !strings.Contains(f.Remedy, "CALL mysql.rds_set_configuration('binlog retention hours'") {
		t.Fatalf("retention unset: %+v (found %v)", f, ok)
	}
	sandboxtest.MustExec(t, db, "CALL mysql.rds_set_configuration('binlog retention hours', 168)")
	if f, ok := check(); ok {
		t.Fatalf("retention a week: %+v", f)
	}
}
