package plan

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// TableInput is everything the table checks look at, gathered before any check runs so that
// each check is a pure function (and table-driven tests can build one by hand).
type TableInput struct {
	Info   *table.Info
	Server *ServerInfo
	// Crashed is the server's complaint when the table cannot be opened (ENGINE is NULL).
	Crashed  string
	Triggers []table.Trigger
	// Partitions is the number of partitions, 0 when not partitioned.
	Partitions int
	// MergeParents are MERGE tables that list this table in their UNION.
	MergeParents []string
	// MergeUnion are the members when this table is itself a MERGE table.
	MergeUnion []string
	// ReferencedBy are foreign keys of other tables that point at this table.
	ReferencedBy []string
	// Compile is the test-compile result, nil when it was not run.
	Compile *CompileResult
	// Estimate is the size projection (for the disk check), nil when unknown.
	Estimate *Estimate
	// TriggerWrites are the other tables the triggers write ("schema.name" → ENGINE, "" when
	// the table is not found), read from the trigger bodies (bodyWrites).
	TriggerWrites map[string]string
}

// SchemaInput is what database-scoped checks look at.
type SchemaInput struct {
	Schema string
	Server *ServerInfo
}

// Catalog holds the server-wide lookups every table's checks need (which MERGE tables list whom,
// which foreign keys point where), read once per plan or per apply --plan: each is a scan of
// every table on the server, and read per table they were the costliest of the checks' reads
// (a 58-table wiki: 11-12 ms each, 1.3 s of the server's time during its apply). A MERGE table or
// foreign key made during the run is not seen (the plan the run follows is older still).
type Catalog struct {
	// mergeMembers maps "db.table" of a member to the MERGE tables that list it.
	mergeMembers map[string][]string
	// mergeUnions maps "db.table" of a MERGE table to its members.
	mergeUnions map[string][]string
	// referencedBy maps "db.table" to the foreign keys that point at it.
	referencedBy map[string][]string
	// digests: the statement digests the run's tables share, once ShareDigests asks for it.
	digests sharedDigests
}

var unionRe = regexp.MustCompile(`UNION=\((.*)\)`)

// LoadCatalog reads the server-wide lookups (Catalog).
func LoadCatalog(ctx context.Context, q Querier) (*Catalog, error) {
	c := &Catalog{mergeMembers: map[string][]string{}, mergeUnions: map[string][]string{}, referencedBy: map[string][]string{}}
	rows, err := q.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE ENGINE = 'MRG_MYISAM'")
	if err != nil {
		return nil, fmt.Errorf("list MERGE tables: %w", err)
	}
	var merges [][2]string
	for rows.Next() {
		var s, n string
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return nil, err
		}
		merges = append(merges, [2]string{s, n})
	}
	rows.Close()
	for _, m := range merges {
		var name, create string
		if err := q.QueryRowContext(ctx, "SHOW CREATE TABLE "+dbconn.QualifiedName(m[0], m[1])).Scan(&name, &create); err != nil {
			continue // a broken MERGE table cannot be opened by the application either
		}
		parent := m[0] + "." + m[1]
		for _, member := range parseUnion(create, m[0]) {
			c.mergeMembers[member] = append(c.mergeMembers[member], parent)
			c.mergeUnions[parent] = append(c.mergeUnions[parent], member)
		}
	}
	fks, err := q.QueryContext(ctx, `SELECT CONCAT(UNIQUE_CONSTRAINT_SCHEMA, '.', REFERENCED_TABLE_NAME),
		CONCAT(CONSTRAINT_SCHEMA, '.', TABLE_NAME, ' (', CONSTRAINT_NAME, ')')
		FROM information_schema.REFERENTIAL_CONSTRAINTS ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("read foreign keys: %w", err)
	}
	defer fks.Close()
	for fks.Next() {
		var to, fk string
		if err := fks.Scan(&to, &fk); err != nil {
			return nil, err
		}
		c.referencedBy[to] = append(c.referencedBy[to], fk)
	}
	return c, fks.Err()
}

// parseUnion reads UNION=(`a`,`db`.`b`) from SHOW CREATE TABLE; unqualified members live in the
// MERGE table's own database.
func parseUnion(create, schema string) []string {
	m := unionRe.FindStringSubmatch(create)
	if m == nil {
		return nil
	}
	var out []string
	// SHOW CREATE TABLE writes `db`.`t` without the spaces that digest text has around the dot.
	rest := strings.ReplaceAll(m[1], "`.`", "` . `")
	for rest != "" {
		ix := workload.TableRefRe.FindStringSubmatchIndex(rest)
		if ix == nil {
			break
		}
		first := workload.UnquoteIdent(rest[ix[2]:ix[3]])
		s, n := schema, first
		if ix[4] >= 0 {
			s, n = first, workload.UnquoteIdent(rest[ix[4]:ix[5]])
		}
		out = append(out, s+"."+n)
		rest = strings.TrimLeft(rest[ix[1]:], ", ")
	}
	return out
}

// gatherTable collects the facts about one table. info may describe a crashed table only by name.
func gatherTable(ctx context.Context, q Querier, srv *ServerInfo, cat *Catalog, info *table.Info, crashed string) (*TableInput, error) {
	in := &TableInput{Info: info, Server: srv, Crashed: crashed}
	key := info.Schema + "." + info.Name
	in.MergeParents = cat.mergeMembers[key]
	in.MergeUnion = cat.mergeUnions[key]
	var err error
	if in.Triggers, err = table.LoadTriggers(ctx, q, info.Schema, info.Name); err != nil {
		return nil, err
	}
	if in.TriggerWrites, err = loadTriggerWrites(ctx, q, info, in.Triggers); err != nil {
		return nil, err
	}
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PARTITIONS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL`, info.Schema, info.Name).Scan(&in.Partitions); err != nil {
		return nil, fmt.Errorf("read partitions of %s: %w", info.QuotedName(), err)
	}
	in.ReferencedBy = cat.referencedBy[key]
	return in, nil
}
