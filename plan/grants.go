package plan

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/enginemig/enginemig/bench/workload"
)

// Grants are the privileges of the connected account (and the roles granted to it), by level.
type Grants struct {
	global map[string]bool
	// db maps a database name or LIKE pattern (grants may use wildcards) to privileges.
	db map[string]map[string]bool
	// table maps "db.table" to privileges.
	table map[string]map[string]bool
	roles []string
}

var (
	grantOnRe   = regexp.MustCompile(`^GRANT (.+?) ON (?:TABLE )?(\S+) TO `)
	grantRoleRe = regexp.MustCompile("^GRANT ((?:`[^`]+`(?:, )?)+) TO ")
	levelRe     = regexp.MustCompile("^(\\*|`(?:[^`]|``)+`)\\.(\\*|`(?:[^`]|``)+`)$")
)

// ParseGrants reads SHOW GRANTS lines. Column-level privileges do not count (apply needs whole
// tables), nor do routine and PROXY grants.
func ParseGrants(lines []string) *Grants {
	g := &Grants{global: map[string]bool{}, db: map[string]map[string]bool{}, table: map[string]map[string]bool{}}
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if m := grantOnRe.FindStringSubmatch(line); m != nil {
			if strings.HasPrefix(m[1], "PROXY") || strings.Contains(line, " ON FUNCTION ") || strings.Contains(line, " ON PROCEDURE ") || strings.Contains(line, " ON PACKAGE ") {
				continue
			}
			lm := levelRe.FindStringSubmatch(m[2])
			if lm == nil {
				continue
			}
			privs := splitPrivileges(m[1])
			switch {
			case lm[1] == "*":
				addAll(g.global, privs)
			case lm[2] == "*":
				addAll(setOf(g.db, workload.UnquoteIdent(lm[1])), privs)
			default:
				addAll(setOf(g.table, workload.UnquoteIdent(lm[1])+"."+workload.UnquoteIdent(lm[2])), privs)
			}
			continue
		}
		if m := grantRoleRe.FindStringSubmatch(line); m != nil {
			g.roles = append(g.roles, strings.Split(m[1], ", ")...)
		}
	}
	return g
}

func setOf(m map[string]map[string]bool, k string) map[string]bool {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	return m[k]
}

func addAll(set map[string]bool, privs []string) {
	for _, p := range privs {
		set[p] = true
	}
}

// splitPrivileges splits "SELECT, INSERT, UPDATE (`a`), ALL PRIVILEGES" and drops column privileges.
func splitPrivileges(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ", ") {
		p = strings.TrimSpace(p)
		if p == "" || strings.Contains(p, "(") {
			continue
		}
		if p == "ALL" {
			p = "ALL PRIVILEGES"
		}
		out = append(out, p)
	}
	return out
}

// Has reports whether priv is granted on schema.table (schema "" and table "" ask for global).
func (g *Grants) Has(priv, schema, table string) bool {
	if has(g.global, priv) {
		return true
	}
	if schema == "" {
		return false
	}
	for pattern, set := range g.db {
		if has(set, priv) && likeMatch(pattern, schema) {
			return true
		}
	}
	return table != "" && has(g.table[schema+"."+table], priv)
}

// has checks one privilege set; ALL PRIVILEGES covers everything, and MariaDB 10.5 renamed
// REPLICATION CLIENT to BINLOG MONITOR (either satisfies the other).
func has(set map[string]bool, priv string) bool {
	if set["ALL PRIVILEGES"] || set[priv] {
		return true
	}
	switch priv {
	case "REPLICATION CLIENT":
		return set["BINLOG MONITOR"]
	case "BINLOG MONITOR":
		return set["REPLICATION CLIENT"]
	}
	return false
}

// likeMatch matches a database-level grant name, where % and _ are wildcards and \ escapes.
func likeMatch(pattern, s string) bool {
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '\\':
			if i+1 < len(pattern) {
				i++
				re.WriteString(regexp.QuoteMeta(string(pattern[i])))
			}
		case '%':
			re.WriteString(".*")
		case '_':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	ok, _ := regexp.MatchString(re.String(), s)
	return ok
}

// loadGrants reads SHOW GRANTS for the current account and for each role granted to it.
func loadGrants(ctx context.Context, q Querier) (*Grants, string) {
	lines, err := showGrants(ctx, q, "SHOW GRANTS")
	if err != nil {
		return nil, err.Error()
	}
	g := ParseGrants(lines)
	seen := map[string]bool{}
	for i := 0; i < len(g.roles); i++ {
		r := g.roles[i]
		if seen[r] {
			continue
		}
		seen[r] = true
		more, err := showGrants(ctx, q, "SHOW GRANTS FOR "+r)
		if err != nil {
			continue // the role may not be visible to us; its privileges then do not count
		}
		rg := ParseGrants(more)
		addAll(g.global, keys(rg.global))
		for k, v := range rg.db {
			addAll(setOf(g.db, k), keys(v))
		}
		for k, v := range rg.table {
			addAll(setOf(g.table, k), keys(v))
		}
		g.roles = append(g.roles, rg.roles...)
	}
	return g, ""
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func showGrants(ctx context.Context, q Querier, stmt string) ([]string, error) {
	rows, err := q.QueryContext(ctx, stmt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", stmt, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, rows.Err()
}
