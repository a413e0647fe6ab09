package plan

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

func TestPrivilegesOfALimitedAccount(t *testing.T) {
	schema, db := sandboxtest.FreshDatabase(t, srv)
	sandboxtest.MustExec(t, db,
		"CREATE TABLE hit_t (id INT PRIMARY KEY) ENGINE=MyISAM",
		"CREATE TRIGGER hit_t_bi BEFORE INSERT ON hit_t FOR EACH ROW SET NEW.id = NEW.id",
		"CREATE USER IF NOT EXISTS 'planner'@'%' IDENTIFIED BY 'pw'",
		"CREATE ROLE IF NOT EXISTS plan_writer",
		"GRANT SELECT, PROCESS ON *.* TO 'planner'@'%'",
		"GRANT INSERT, UPDATE, DELETE ON `"+schema+"`.* TO plan_writer",
		"GRANT plan_writer TO 'planner'@'%'",
		"SET DEFAULT ROLE plan_writer FOR 'planner'@'%'")
	t.Cleanup(func() { db.Exec("DROP USER IF EXISTS 'planner'@'%'"); db.Exec("DROP ROLE IF EXISTS plan_writer") })
	cfg := srv.Config(schema)
	cfg.User, cfg.Passwd = "planner", "pw"
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	limited := sql.OpenDB(connector)
	defer limited.Close()

	p := inspect(t, limited, Options{Databases: []string{schema}, TestCompile: true})
	tp, _ := p.Table(schema, "hit_t")
	f, found := hasCheck(tp.Findings, "privileges")
	if !found || f.Severity != Blocker {
		t.Fatalf("want privileges blocker, got %+v", tp.Findings)
	}
	for _, want := range []string{"CREATE", "DROP", "ALTER", "INDEX", "LOCK TABLES", "TRIGGER"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("missing %s not reported: %s", want, f.Message)
		}
	}
	for _, granted := range []string{"SELECT", "INSERT", "UPDATE", "DELETE"} {
		if strings.Contains(f.Message, " "+granted+",") || strings.Contains(f.Message, "lacks "+granted) {
			t.Errorf("%s is granted (directly or through the role) but reported missing: %s", granted, f.Message)
		}
	}
	stageWarned := false
	for _, f := range tp.Findings {
		stageWarned = stageWarned || (f.Check == "privileges" && f.Severity == Warning && strings.Contains(f.Message, "CREATE TEMPORARY TABLES"))
	}
	if !stageWarned {
		t.Errorf("want a warning that the copy cannot stage its chunks without CREATE TEMPORARY TABLES, got %+v", tp.Findings)
	}
	// Neither capture works for this account (it may not read the binlog, nor create triggers
	// with the binlog on): the binlog check refuses, naming every route.
	if bf, ok := hasCheck(p.Findings, "binlog"); !ok || bf.Severity != Blocker || !strings.Contains(bf.Message, "REPLICATION SLAVE") ||
		!strings.Contains(bf.Message, "error 1419") || !strings.Contains(bf.Remedy, "GRANT REPLICATION SLAVE") ||
		!strings.Contains(bf.Remedy, "log_bin_trust_function_creators") {
		t.Errorf("want the binlog blocker naming both captures' routes, got %+v", p.Findings)
	}
	// Without CREATE the test-compile cannot run: reported, not fatal.
	if f, ok := hasCheck(tp.Findings, "shadow-compile"); !ok || f.Severity != Info {
		t.Errorf("want a skipped test-compile note, got %+v", tp.Findings)
	}

	rootPlan := inspect(t, db, Options{Databases: []string{schema}})
	rt, _ := rootPlan.Table(schema, "hit_t")
	if _, found := hasCheck(rt.Findings, "privileges"); found {
		t.Errorf("root has every privilege: %+v", rt.Findings)
	}
	if _, found := hasCheck(rootPlan.Findings, "privileges"); found {
		t.Errorf("root has every privilege: %+v", rootPlan.Findings)
	}
}
