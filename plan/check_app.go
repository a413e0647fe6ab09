package plan

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/enginemig/enginemig/bench/workload"
)

// The application checks read performance_schema's statement digests: what the application ran
// since the server started. Digest text is normalised ("SELECT COUNT ( * ) FROM `t`"), so the
// patterns below match that form. Without digests they fall back to server-wide status counters,
// which cannot name a table.

func init() {
	register(Check{ID: "count-star", Severity: Warning, Scope: ScopeTable,
		What:  "SELECT COUNT(*) without WHERE on the table: instant on MyISAM, a full scan on InnoDB",
		table: checkCountStar})
	register(Check{ID: "lock-tables", Severity: Warning, Scope: ScopeTable,
		What:   "LOCK TABLES used on the table: with InnoDB it no longer serialises against every reader, and it mixes with transactions",
		table:  checkLockTables,
		server: checkLockTablesCounter})
	register(Check{ID: "insert-delayed", Severity: Blocker, Scope: ScopeTable,
		What:   "INSERT DELAYED into the table: MariaDB refuses it on InnoDB (error 1616); MySQL silently makes it a plain INSERT",
		table:  checkInsertDelayed,
		server: fallbackStatus("insert-delayed", "Delayed_writes", Warning, "INSERT DELAYED rows were written on this server")})
	register(Check{ID: "transactions", Severity: Warning, Scope: ScopeSchema,
		What:   "ROLLBACK / BEGIN / autocommit changes in sessions using the database: MyISAM ignored them, InnoDB honours them (rollbacks, deadlocks, lock-wait timeouts)",
		schema: checkTransactions,
		server: fallbackStatus("transactions", "Com_rollback", Warning, "ROLLBACK statements ran on this server")})
}

var (
	countStarRe     = regexp.MustCompile(`(?i)^SELECT COUNT \( (?:\*|\?) \) FROM (.+?)(?: LIMIT .*)?$`)
	insertDelayedRe = regexp.MustCompile(`(?i)^INSERT DELAYED (?:IGNORE )?(?:INTO )?(.+)$`)
	lockTablesRe    = regexp.MustCompile(`(?i)^LOCK TABLES? (.+)$`)
	transactionRe   = regexp.MustCompile("(?i)^(ROLLBACK|BEGIN|START TRANSACTION|SET (?:SESSION |@@SESSION \\. |@@)?`?autocommit`? = |XA )")
)

func (in *TableInput) refersTo(d Digest, s string) (bool, string) {
	return workload.RefersTo(s, d.Schema, in.Info.Schema, in.Info.Name)
}

func checkCountStar(in *TableInput) []Finding {
	if in.Server == nil || in.Info == nil {
		return nil
	}
	var out []Finding
	for _, d := range in.Server.Digests {
		m := countStarRe.FindStringSubmatch(strings.TrimSpace(d.Text))
		if m == nil {
			continue
		}
		// Anything after the table (WHERE, JOIN) makes it a different query.
		if ok, rest := in.refersTo(d, m[1]); ok && rest == "" {
			out = append(out, newFinding("count-star", Warning,
				fmt.Sprintf("%q ran %d time(s): MyISAM answers from its row counter, InnoDB scans the whole table (%d rows)", d.Text, d.Count, in.Info.Rows),
				"keep a counter table or cache the count in the application, or accept an approximate TABLE_ROWS from information_schema"))
		}
	}
	return out
}

func checkLockTables(in *TableInput) []Finding {
	if in.Server == nil || in.Info == nil {
		return nil
	}
	n, count := digestsFor(in.Server.Digests, func(d Digest) bool {
		m := lockTablesRe.FindStringSubmatch(strings.TrimSpace(d.Text))
		if m == nil || ownLockTables(d.Text, in.Info.Name) {
			return false
		}
		for _, item := range strings.Split(m[1], " , ") {
			if ok, _ := in.refersTo(d, item); ok {
				return true
			}
		}
		return false
	})
	if n == 0 {
		return nil
	}
	return []Finding{newFinding("lock-tables", Warning,
		fmt.Sprintf("LOCK TABLES on this table ran %d time(s): with InnoDB, LOCK TABLES commits open transactions and other sessions' row locks interact with it", count),
		"check why the application locks the table; with InnoDB a transaction (SELECT ... FOR UPDATE) usually replaces it; cut-over waits for the lock to be released")}
}

// ownLockTables recognises enginemig's own LOCK TABLES by the other tables they name: the
// verification alias `_enginemig_verify`, the shadow `_t_new` (verify's repair), the cut-over
// sentry `t_emswap`.
func ownLockTables(digest, name string) bool {
	for _, mark := range []string{"`_enginemig_verify`", "`_" + name + "_new`", "`" + name + "_emswap`", "`_" + name + "_old`"} {
		if strings.Contains(digest, mark) {
			return true
		}
	}
	return false
}

func checkInsertDelayed(in *TableInput) []Finding {
	if in.Server == nil || in.Info == nil {
		return nil
	}
	n, count := digestsFor(in.Server.Digests, func(d Digest) bool {
		m := insertDelayedRe.FindStringSubmatch(strings.TrimSpace(d.Text))
		if m == nil {
			return false
		}
		ok, _ := in.refersTo(d, m[1])
		return ok
	})
	if n == 0 {
		return nil
	}
	if in.Server.MariaDB() {
		return []Finding{newFinding("insert-delayed", Blocker,
			fmt.Sprintf("INSERT DELAYED into this table ran %d time(s): MariaDB refuses it on InnoDB (error 1616), so these inserts would fail after conversion", count),
			"change the application to a plain INSERT (or INSERT ... with a queue) before converting")}
	}
	return []Finding{newFinding("insert-delayed", Info,
		fmt.Sprintf("INSERT DELAYED into this table ran %d time(s): MySQL treats it as a plain INSERT (the client now waits for it)", count),
		"remove DELAYED from the application's statements")}
}

func checkTransactions(in *SchemaInput) []Finding {
	if in.Server == nil {
		return nil
	}
	kinds := map[string]int64{}
	n, _ := digestsFor(in.Server.Digests, func(d Digest) bool {
		if d.Schema != in.Schema {
			return false
		}
		m := transactionRe.FindStringSubmatch(strings.TrimSpace(d.Text))
		if m == nil {
			return false
		}
		kind := strings.ToUpper(strings.Fields(m[1])[0])
		if kind == "SET" {
			kind = "SET autocommit"
		}
		kinds[kind] += d.Count
		return true
	})
	if n == 0 {
		return nil
	}
	var parts []string
	for _, k := range []string{"BEGIN", "START", "ROLLBACK", "SET autocommit", "XA"} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s x%d", k, kinds[k]))
		}
	}
	what := fmt.Sprintf("sessions using database %s ran transaction statements (%s): MyISAM ignored them; on InnoDB a ROLLBACK really undoes writes, autocommit=0 keeps row locks until COMMIT, and deadlocks or lock-wait timeouts (errors 1213/1205) become possible", in.Schema, strings.Join(parts, ", "))
	remedy := "check that the application commits what it means to keep and retries on errors 1213/1205"
	if !in.Server.MariaDB() {
		// package mdl: MySQL has no LOCK TABLES ... NOWAIT.
		what += "; and on MySQL the cut-over's lock queues behind an open transaction on the table: one that read the table and then writes it while the lock waits fails with 1213 at the swap (a rollback's too)"
		remedy += ", or run apply and rollback while such transactions pause (docs/runbook/special-cases.md, \"Open transactions and the cut-over\")"
	}
	return []Finding{newFinding("transactions", Warning, what, remedy)}
}

// fallbackStatus reports a server-wide counter when there are no digests to attribute statements
// to tables.
// checkLockTablesCounter reports the server-wide LOCK TABLES counter when no digest can name
// the tables: less what this process sent (a plan's later tables are checked after apply
// converted the earlier ones, whose verification and cut-overs lock too), and saying what else
// the counter holds and how to see per table instead.
func checkLockTablesCounter(s *ServerInfo) []Finding {
	n := s.Status["Com_lock_tables"] - s.OwnLockTables
	if s.DigestsAvailable || n <= 0 {
		return nil
	}
	own := ""
	if s.OwnLockTables > 0 {
		own = fmt.Sprintf(", less the %d this enginemig run sent", s.OwnLockTables)
	}
	return []Finding{newFinding("lock-tables", Warning,
		fmt.Sprintf("LOCK TABLES ran %d time(s) on this server since it started (Com_lock_tables%s), on tables no digest can name: "+
			"the counter is server-wide, and also counts earlier enginemig runs (their verification and cut-overs) and backups that lock (mysqldump --lock-tables)", n, own),
		"for a per-table view, turn on performance_schema (performance_schema=ON in the server's configuration, a restart) with the statements_digest consumer "+
			"(UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME = 'statements_digest'), let the application run, and plan again: "+
			"it then names each table the application locks and leaves enginemig's own statements out")}
}

func fallbackStatus(id, counter string, sev Severity, what string) func(*ServerInfo) []Finding {
	return func(s *ServerInfo) []Finding {
		if s.DigestsAvailable || s.Status[counter] == 0 {
			return nil
		}
		return []Finding{newFinding(id, sev,
			fmt.Sprintf("%s (%s=%d) and performance_schema statement digests are not available to tell which tables", what, counter, s.Status[counter]),
			"enable performance_schema (with the statements_digest consumer) and plan again to see which tables are affected")}
	}
}
