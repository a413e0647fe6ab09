package plan

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/table"
)

// A statement that fails half-way keeps on MyISAM whatever it changed before the error (MyISAM
// has no rollback), and is undone whole on InnoDB, its triggers' writes with it. An application
// that lives with such errors may rely on the half that stayed without knowing it. These checks
// report where that happens: from the table's trigger bodies, and from the statement digests'
// error counts (SUM_ERRORS).

func init() {
	registerTable("trigger-writes-own-table", Warning,
		"a trigger of the table writes the table itself: every write that fires it fails (error 1442) on both engines, but MyISAM keeps the row the statement changed before the trigger ran, InnoDB undoes it",
		checkTriggerWritesOwnTable)
	registerTable("errors-with-triggers", Warning,
		"statements writing a table that has triggers ended with errors (digests' SUM_ERRORS): MyISAM keeps the rows and trigger writes done before the error, InnoDB undoes the statement with its triggers' writes",
		checkErrorsWithTriggers)
	registerTable("trigger-other-engine", Blocker,
		"enforce_gtid_consistency=ON and a trigger of the table writes a non-transactional table (MyISAM, Aria, MEMORY ...): once the table is InnoDB, every write that fires it fails with error 1785",
		checkTriggerOtherEngine)
	registerTable("multi-row-errors", Warning,
		"multi-row INSERT (VALUES lists, INSERT ... SELECT) or UPDATE without IGNORE on the table ended with errors, e.g. a duplicate key: MyISAM keeps the rows written before the error, InnoDB undoes the whole statement",
		checkMultiRowErrors)
}

// tableRef is a possibly qualified, possibly backquoted table name in SQL text.
const tableRef = "((?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)(?:\\s*\\.\\s*(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+))?)"

// bodyWriteRe finds the tables a trigger body writes (group 1: INSERT/REPLACE, 2: UPDATE,
// 3: DELETE). It reads SQL text, not a parse: a write inside a string or a comment counts too,
// which only adds a warning.
var bodyWriteRe = regexp.MustCompile(`(?is)\b(?:(?:INSERT|REPLACE)\s+(?:(?:LOW_PRIORITY|HIGH_PRIORITY|DELAYED|IGNORE)\s+)*(?:INTO\s+)?` + tableRef +
	`|UPDATE\s+(?:(?:LOW_PRIORITY|IGNORE)\s+)*` + tableRef +
	`|DELETE\s+(?:(?:LOW_PRIORITY|QUICK|IGNORE)\s+)*FROM\s+` + tableRef + `)`)

// onDuplicateRe ends in the UPDATE of INSERT ... ON DUPLICATE KEY UPDATE, which names columns.
var onDuplicateRe = regexp.MustCompile(`(?i)DUPLICATE\s+KEY\s*$`)

// bodyWrites returns the tables (schema, name; schema "" when unqualified) that a trigger body
// writes.
func bodyWrites(body string) [][2]string {
	var out [][2]string
	for _, m := range bodyWriteRe.FindAllStringSubmatchIndex(body, -1) {
		if onDuplicateRe.MatchString(body[:m[0]]) {
			continue
		}
		for g := 1; g <= 3; g++ {
			if m[2*g] < 0 {
				continue
			}
			parts := splitQualified(body[m[2*g]:m[2*g+1]])
			out = append(out, parts)
		}
	}
	return out
}

var qualifiedRe = regexp.MustCompile("^(`(?:[^`]|``)+`|[A-Za-z0-9_$]+)(?:\\s*\\.\\s*(`(?:[^`]|``)+`|[A-Za-z0-9_$]+))?$")

// splitQualified splits "`db` . `t`" or "t" into schema ("" when unqualified) and name.
func splitQualified(ref string) [2]string {
	m := qualifiedRe.FindStringSubmatch(strings.TrimSpace(ref))
	if m == nil {
		return [2]string{"", ref}
	}
	if m[2] == "" {
		return [2]string{"", workload.UnquoteIdent(m[1])}
	}
	return [2]string{workload.UnquoteIdent(m[1]), workload.UnquoteIdent(m[2])}
}

func checkTriggerWritesOwnTable(in *TableInput) []Finding {
	if in.Info == nil {
		return nil
	}
	var names []string
	after := false
	for _, tr := range in.Triggers {
		for _, w := range bodyWrites(string(tr.Body)) {
			if (w[0] == "" || w[0] == in.Info.Schema) && strings.EqualFold(w[1], in.Info.Name) {
				names = append(names, fmt.Sprintf("%s (%s %s)", tr.Name, tr.Timing, tr.Event))
				after = after || strings.EqualFold(tr.Timing, "AFTER")
				break
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	msg := fmt.Sprintf("trigger(s) %s write this table itself: every statement that fires them fails with error 1442 on either engine. ", strings.Join(names, ", "))
	if after {
		msg += "On MyISAM the row the statement wrote before an AFTER trigger ran stays, so these writes seem to work despite the error; on InnoDB the statement is undone and they change nothing"
	} else {
		msg += "On MyISAM the rows a multi-row statement wrote before the failing row stay; on InnoDB the whole statement is undone"
	}
	return []Finding{newFinding("trigger-writes-own-table", Warning, msg,
		"find out whether the application relies on those rows (its writes report errors but leave data on MyISAM); do the trigger's change in the statement itself (a BEFORE trigger may SET NEW.col) or in the application, or drop the trigger, before converting")}
}

// writeDigestRe matches a digest that writes the table named at its group 1: INSERT, REPLACE,
// UPDATE, DELETE and LOAD DATA, in digest form ("INSERT INTO `t` ...").
var writeDigestRe = regexp.MustCompile("(?i)^(?:(?:INSERT|REPLACE)(?: (?:LOW_PRIORITY|HIGH_PRIORITY|DELAYED|IGNORE))*(?: INTO)?|UPDATE(?: (?:LOW_PRIORITY|IGNORE))*|DELETE(?: (?:LOW_PRIORITY|QUICK|IGNORE))* FROM|LOAD DATA .*? INTO TABLE) (.+)$")

// failedWrites returns the digests that write the table and ended with errors, among those
// match accepts.
func (in *TableInput) failedWrites(match func(d Digest) bool) []Digest {
	var out []Digest
	for _, d := range in.Server.Digests {
		if d.Errors == 0 {
			continue
		}
		m := writeDigestRe.FindStringSubmatch(strings.TrimSpace(d.Text))
		if m == nil {
			continue
		}
		if ok, _ := in.refersTo(d, m[1]); ok && match(d) {
			out = append(out, d)
		}
	}
	return out
}

// describeDigests lists up to three digests with their error counts, for a message.
func describeDigests(ds []Digest) string {
	var parts []string
	for _, d := range ds[:min(3, len(ds))] {
		text := d.Text
		if len(text) > 120 {
			text = text[:117] + "..."
		}
		parts = append(parts, fmt.Sprintf("%q: %d error(s) in %d run(s)", text, d.Errors, d.Count))
	}
	if len(ds) > 3 {
		parts = append(parts, fmt.Sprintf("and %d more", len(ds)-3))
	}
	return strings.Join(parts, "; ")
}

func checkErrorsWithTriggers(in *TableInput) []Finding {
	if in.Server == nil || in.Info == nil || len(in.Triggers) == 0 {
		return nil
	}
	ds := in.failedWrites(func(Digest) bool { return true })
	if len(ds) == 0 {
		return nil
	}
	return []Finding{newFinding("errors-with-triggers", Warning,
		fmt.Sprintf("statements writing this table, which has %d trigger(s), ended with errors: %s. On MyISAM the rows changed before the error, and what the triggers wrote to MyISAM tables, stay; on InnoDB the statement is undone with its triggers' writes to InnoDB tables",
			len(in.Triggers), describeDigests(ds)),
		"find out why these statements fail and whether the application relies on what a failed one left behind; fix the statement or the trigger before converting")}
}

// multiRowDigestRe recognises statements that write several rows in one go, in digest form: an
// INSERT with several VALUES lists (digests fold them into "(...) /* , ... */"), INSERT ...
// SELECT, and UPDATE. IGNORE turns their errors into warnings, so those are left out.
var (
	multiRowInsertRe = regexp.MustCompile(`(?i)^(?:INSERT|REPLACE) (?:(?:LOW_PRIORITY|HIGH_PRIORITY|DELAYED) )*(?:INTO )?.*(?:\) /\* , \.\.\. \*/|\bSELECT\b)`)
	updateRe         = regexp.MustCompile(`(?i)^UPDATE `)
	ignoreRe         = regexp.MustCompile(`(?i)^(?:INSERT|UPDATE)(?: (?:LOW_PRIORITY|HIGH_PRIORITY|DELAYED))* IGNORE\b`)
)

func checkMultiRowErrors(in *TableInput) []Finding {
	if in.Server == nil || in.Info == nil {
		return nil
	}
	ds := in.failedWrites(func(d Digest) bool {
		text := strings.TrimSpace(d.Text)
		return !ignoreRe.MatchString(text) && (multiRowInsertRe.MatchString(text) || updateRe.MatchString(text))
	})
	if len(ds) == 0 {
		return nil
	}
	return []Finding{newFinding("multi-row-errors", Warning,
		fmt.Sprintf("multi-row writes on this table ended with errors (a duplicate key, a value out of range): %s. On MyISAM the rows written before the error stay; on InnoDB the whole statement is undone", describeDigests(ds)),
		"find out whether the application relies on the rows a failed statement left (retrying only the rest, say); add IGNORE or ON DUPLICATE KEY UPDATE where skipping bad rows is what it wants, or write row by row")}
}

// loadTriggerWrites reads the engines of the other tables the triggers write.
func loadTriggerWrites(ctx context.Context, q Querier, info *table.Info, triggers []table.Trigger) (map[string]string, error) {
	out := map[string]string{}
	for _, tr := range triggers {
		for _, w := range bodyWrites(string(tr.Body)) {
			schema := w[0]
			if schema == "" {
				schema = info.Schema // a trigger's statements run in its table's database
			}
			key := schema + "." + w[1]
			if _, seen := out[key]; seen || (schema == info.Schema && strings.EqualFold(w[1], info.Name)) {
				continue
			}
			var engine sql.NullString
			err := q.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, w[1]).Scan(&engine)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("engine of %s, written by trigger %s: %w", key, tr.Name, err)
			}
			out[key] = engine.String
		}
	}
	return out, nil
}

// transactional engines keep a statement's changes atomic with InnoDB's.
var transactional = map[string]bool{"innodb": true, "xtradb": true, "ndbcluster": true, "ndb": true}

func checkTriggerOtherEngine(in *TableInput) []Finding {
	if in.Server == nil || !strings.EqualFold(in.Server.Var("enforce_gtid_consistency"), "ON") {
		return nil
	}
	var writes []string
	for name, engine := range in.TriggerWrites {
		if engine != "" && !transactional[strings.ToLower(engine)] {
			writes = append(writes, fmt.Sprintf("%s (%s)", name, engine))
		}
	}
	if len(writes) == 0 {
		return nil
	}
	sort.Strings(writes)
	return []Finding{newFinding("trigger-other-engine", Blocker,
		fmt.Sprintf("with enforce_gtid_consistency=ON a statement may not write InnoDB and non-transactional tables together, and this table's triggers write %s: once the table is InnoDB, every write that fires them fails with error 1785 (today, on MyISAM, they work)",
			strings.Join(writes, ", ")),
		"convert the tables the triggers write to InnoDB first, or change the triggers so that they write InnoDB tables only")}
}
