package plan

import (
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

func init() {
	register(Check{ID: "privileges", Severity: Blocker, Scope: ScopeTable,
		What:   "the account lacks a privilege apply needs: SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, LOCK TABLES, TRIGGER (with triggers or trigger capture) on the table's database (binlog capture's REPLICATION SLAVE and REPLICATION CLIENT/BINLOG MONITOR: the binlog check)",
		table:  checkTablePrivileges,
		server: checkServerPrivileges})
}

// tablePrivileges are needed on the table and, for the working tables apply creates next to it
// (_<t>_new, _<t>_old), on its database.
var (
	tablePrivileges    = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "ALTER", "INDEX"}
	databasePrivileges = []string{"CREATE", "DROP", "LOCK TABLES"}
	globalPrivileges   = []string{"REPLICATION SLAVE", "REPLICATION CLIENT"}
)

func checkTablePrivileges(in *TableInput) []Finding {
	if in.Server == nil || in.Server.Grants == nil || in.Info == nil {
		return nil
	}
	g, schema, name := in.Server.Grants, in.Info.Schema, in.Info.Name
	var missing []string
	for _, p := range tablePrivileges {
		if !g.Has(p, schema, name) {
			missing = append(missing, p)
		}
	}
	for _, p := range databasePrivileges {
		if !g.Has(p, schema, "") {
			missing = append(missing, p)
		}
	}
	if (len(in.Triggers) > 0 || in.Server.capturesWithTriggers()) && !g.Has("TRIGGER", schema, name) {
		missing = append(missing, "TRIGGER")
	}
	var out []Finding
	if len(missing) > 0 {
		out = append(out, newFinding("privileges", Blocker,
			fmt.Sprintf("account %s lacks %s on %s", in.Server.User, strings.Join(missing, ", "), in.Info.QuotedName()),
			fmt.Sprintf("GRANT %s ON %s.* TO <enginemig account>", strings.Join(missing, ", "), dbconn.QuoteIdent(schema))))
	}
	if !g.Has("CREATE TEMPORARY TABLES", schema, "") {
		out = append(out, newFinding("privileges", Warning,
			fmt.Sprintf("account %s works without, but lacks CREATE TEMPORARY TABLES on %s: while the application waits for the table, copy chunks then hold it while they write to InnoDB too, not only while they read (about 3 times as long)", in.Server.User, dbconn.QuoteIdent(schema)),
			fmt.Sprintf("GRANT CREATE TEMPORARY TABLES ON %s.* TO <enginemig account>", dbconn.QuoteIdent(schema))))
	}
	return out
}

func checkServerPrivileges(s *ServerInfo) []Finding {
	if s.Grants == nil {
		if s.GrantsErr == "" {
			return nil
		}
		return []Finding{newFinding("privileges", Warning, "could not read the account's privileges: "+s.GrantsErr,
			"check the privileges by hand against docs/plan/checks.md")}
	}
	// The replication privileges binlog capture needs are ChooseCapture's (the binlog check): auto
	// captures with triggers without them, and --capture binlog is refused there, with every route.
	return optionalPrivileges(s)
}

// optionalPrivileges are grants apply works without, each at a cost the finding names.
func optionalPrivileges(s *ServerInfo) []Finding {
	var costs, grants []string
	if !s.Grants.Has("PROCESS", "", "") {
		cost := "PROCESS: the cut-over cannot see long-running queries on the table, so its lock request may queue behind one and stall the application until it ends; nor the transactions that began before it, so one that reads the table after the swap may get error 1412"
		if s.Galera != nil {
			cost += ", nor, on this Galera node, the application's statements queued behind someone's lock of the table, one of which the server may then abort (error 1689) when an attempt asks for the table"
		}
		costs = append(costs, cost)
		grants = append(grants, "GRANT PROCESS ON *.* TO <enginemig account>")
	}
	if !s.Grants.Has("SELECT", "performance_schema", "") {
		costs = append(costs, "SELECT on performance_schema: plan cannot measure lock waits (the contention ranking shows n/a) and bench --mix auto cannot read the table's statement mix")
		grants = append(grants, "GRANT SELECT ON performance_schema.* TO <enginemig account>")
	}
	if len(costs) == 0 {
		return nil
	}
	return []Finding{newFinding("privileges", Warning, fmt.Sprintf("account %s works without, but lacks: %s", s.User, strings.Join(costs, "; ")),
		strings.Join(grants, "; "))}
}
