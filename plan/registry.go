package plan

import "sort"

// Scope says what a check looks at.
type Scope string

const (
	ScopeTable  Scope = "table"  // one table
	ScopeSchema Scope = "schema" // one database (e.g. how its sessions use transactions)
	ScopeServer Scope = "server" // the server's configuration and the tool's privileges
)

// Check describes one registered check. The id is stable: scripts and apply match on it.
type Check struct {
	ID string
	// Severity is the worst severity the check reports (for docs; a finding may be milder).
	Severity Severity
	Scope    Scope
	// What is a one-line description for docs and listings.
	What string

	table  func(*TableInput) []Finding
	schema func(*SchemaInput) []Finding
	server func(*ServerInfo) []Finding
}

// registry holds every check; each check file adds itself from init, so adding a check is
// adding a file (the pattern of Spirit's check package).
var registry = map[string]Check{}

func register(c Check) {
	old, ok := registry[c.ID]
	if !ok {
		registry[c.ID] = c
		return
	}
	// One id may have a table part and a server part (privileges, disk): merge them, but never
	// let two files claim the same part of an id.
	if (c.table != nil && old.table != nil) || (c.schema != nil && old.schema != nil) || (c.server != nil && old.server != nil) {
		panic("plan: duplicate check id " + c.ID)
	}
	if c.table != nil {
		old.table, old.Scope = c.table, ScopeTable
	}
	if c.schema != nil {
		old.schema = c.schema
	}
	if c.server != nil {
		old.server = c.server
	}
	if c.Severity.rank() < old.Severity.rank() {
		old.Severity = c.Severity
	}
	registry[c.ID] = old
}

func registerTable(id string, sev Severity, what string, f func(*TableInput) []Finding) {
	register(Check{ID: id, Severity: sev, Scope: ScopeTable, What: what, table: f})
}

func registerServer(id string, sev Severity, what string, f func(*ServerInfo) []Finding) {
	register(Check{ID: id, Severity: sev, Scope: ScopeServer, What: what, server: f})
}

// Checks lists every registered check, ordered by id.
func Checks() []Check {
	out := make([]Check, 0, len(registry))
	for _, c := range registry {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func newFinding(id string, sev Severity, msg, remedy string) Finding {
	return Finding{Check: id, Severity: sev, Message: msg, Remedy: remedy}
}

// runTableChecks runs every table-level check on in, in id order, and merges the test-compile
// result into them.
func runTableChecks(in *TableInput) []Finding {
	var out []Finding
	for _, c := range Checks() {
		if c.table != nil {
			out = append(out, c.table(in)...)
		}
	}
	out = mergeCompile(out, in.Compile)
	sortFindings(out)
	return out
}

func runSchemaChecks(in *SchemaInput) []Finding {
	var out []Finding
	for _, c := range Checks() {
		if c.schema != nil {
			for _, f := range c.schema(in) {
				f.Schema = in.Schema
				out = append(out, f)
			}
		}
	}
	sortFindings(out)
	return out
}

func runServerChecks(s *ServerInfo) []Finding {
	var out []Finding
	for _, c := range Checks() {
		if c.server != nil {
			out = append(out, c.server(s)...)
		}
	}
	sortFindings(out)
	return out
}
