package plan

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// CompileResult is the outcome of creating the proposed InnoDB table under a scratch name.
type CompileResult struct {
	// Ran is false when the compile could not be attempted (no CREATE privilege, name taken);
	// Skipped then says why.
	Ran     bool
	Skipped string
	// ErrNumber and ErrMessage are the server's error when InnoDB refused the table (0 when it
	// accepted it).
	ErrNumber  uint16
	ErrMessage string
	DDL        string
	// TriggerRefused names the trigger the server would not create again (as apply's stand-in,
	// on the scratch table) and why; empty when every trigger was accepted or none was tried.
	TriggerRefused string
}

// compileErrorCheck maps InnoDB's refusals to the check that explains them, so a refusal that a
// static check already predicted is reported once, with the server's own words attached.
var compileErrorCheck = map[uint16]string{
	1075: "autoinc-not-leading", // ER_WRONG_AUTO_KEY
	1071: "key-too-long",        // ER_TOO_LONG_KEY
	1709: "key-too-long",        // ER_INDEX_COLUMN_TOO_LONG (767 bytes, COMPACT/REDUNDANT)
	1118: "row-too-large",       // ER_TOO_BIG_ROWSIZE
	1117: "too-many-columns",    // ER_TOO_MANY_FIELDS
	1069: "too-many-indexes",    // ER_TOO_MANY_KEYS
	1070: "too-many-indexes",    // ER_TOO_MANY_KEY_PARTS
	1173: "require-pk-setting",  // ER_REQUIRES_PRIMARY_KEY (innodb_force_primary_key)
	3750: "require-pk-setting",  // ER_TABLE_WITHOUT_PK (MySQL sql_require_primary_key)
}

// scratchName is the test-compile table's name: fixed per table (so a leftover is recognisable),
// short enough for any source name, and never the name apply uses for its shadow.
func scratchName(schema, name string) string {
	h := fnv.New32a()
	h.Write([]byte(schema + "\x00" + name))
	return fmt.Sprintf("_enginemig_plan_%08x", h.Sum32())
}

// compileSession prepares a dedicated connection for test-compiles: strict mode as apply will
// use it, and, when the account may, sql_log_bin=0 so that replicas never see the scratch table.
// It returns whether the CREATE/DROP will be written to the binlog.
func compileSession(ctx context.Context, q Querier) (binlogged bool, err error) {
	// Only when it is off: MySQL (9.7 here) lets only SESSION_VARIABLES_ADMIN set it at all, and its
	// default is ON.
	var strict int
	if err := q.QueryRowContext(ctx, "SELECT @@SESSION.innodb_strict_mode").Scan(&strict); err != nil || strict != 1 {
		if _, err := q.ExecContext(ctx, "SET SESSION innodb_strict_mode = ON"); err != nil {
			return false, fmt.Errorf("test-compile: set innodb_strict_mode: %w", err)
		}
	}
	if _, err := q.ExecContext(ctx, "SET SESSION sql_log_bin = 0"); err != nil {
		return true, nil
	}
	return false, nil
}

// testCompile creates the InnoDB shadow of info (all indexes, as after the copy, and with rowID
// the primary key apply adds to a keyless table by default) under a scratch name and drops it
// again. It is the only statement plan runs that writes.
func testCompile(ctx context.Context, q Querier, info *table.Info, trs []table.Trigger, rowID bool) (*CompileResult, error) {
	res := &CompileResult{}
	scratch := scratchName(info.Schema, info.Name)
	ddl, err := info.Shadow(scratch, false, rowID)
	if err != nil {
		res.Skipped = err.Error()
		return res, nil
	}
	// STATS_PERSISTENT=0 keeps InnoDB from writing rows for the scratch table into
	// mysql.innodb_table_stats/innodb_index_stats.
	res.DDL = strings.Replace(ddl.Create, "\n) ENGINE=InnoDB", "\n) ENGINE=InnoDB STATS_PERSISTENT=0", 1)
	_, err = q.ExecContext(ctx, res.DDL)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		res.Ran = true
		res.TriggerRefused = compileTriggers(ctx, q, info, scratch, trs)
		if _, derr := q.ExecContext(ctx, "DROP TABLE IF EXISTS "+dbconn.QualifiedName(info.Schema, scratch)); derr != nil {
			return res, fmt.Errorf("test-compile: drop scratch table %s: %w", dbconn.QualifiedName(info.Schema, scratch), derr)
		}
	case errors.As(err, &me) && me.Number == 1050:
		res.Skipped = fmt.Sprintf("scratch table %s already exists (left by an interrupted plan? drop it)", dbconn.QualifiedName(info.Schema, scratch))
	case errors.As(err, &me) && (me.Number == 1142 || me.Number == 1044 || me.Number == 1227):
		res.Skipped = "no privilege to create the scratch table: " + me.Message
	case errors.As(err, &me):
		res.Ran, res.ErrNumber, res.ErrMessage = true, me.Number, me.Message
	default:
		return nil, fmt.Errorf("test-compile %s: %w", info.QuotedName(), err)
	}
	return res, nil
}

// compileTriggers creates each trigger, as apply's stand-in, on the scratch table in the trigger's
// own session context, which proves the server accepts its definition again (the scratch table
// and its triggers go with the DROP). It returns the first refusal; a missing privilege is not
// one (the privileges check reports it).
func compileTriggers(ctx context.Context, q Querier, info *table.Info, scratch string, trs []table.Trigger) string {
	if len(trs) == 0 {
		return ""
	}
	var mode, cs, coll string
	if err := q.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode, @@SESSION.character_set_client, @@SESSION.collation_connection").Scan(&mode, &cs, &coll); err != nil {
		return ""
	}
	defer func() {
		for _, set := range (table.Trigger{SQLMode: mode, Charset: cs, Collation: coll}).Session() {
			q.ExecContext(context.WithoutCancel(ctx), set)
		}
	}()
	for _, tr := range trs {
		err := execAll(ctx, q, append(tr.Session(), tr.CreateGuarded(info.Schema, scratch, info.Name)))
		var me *mysql.MySQLError
		switch {
		case err == nil:
		case errors.As(err, &me) && (me.Number == 1142 || me.Number == 1227 || me.Number == 1044):
			return ""
		default:
			return fmt.Sprintf("trigger %s: %v", tr.Name, err)
		}
	}
	return ""
}

func execAll(ctx context.Context, q Querier, stmts []string) error {
	for _, s := range stmts {
		if _, err := q.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// mergeCompile folds the compile result into the static findings: a refusal that a static check
// predicted gets the server's message appended; one that none predicted becomes a blocker of the
// mapped check (or shadow-compile when unmapped). A skipped compile is an info finding.
func mergeCompile(fs []Finding, c *CompileResult) []Finding {
	if c == nil {
		return fs
	}
	if !c.Ran {
		if c.Skipped != "" {
			fs = append(fs, newFinding("shadow-compile", Info, "test-compile not run: "+c.Skipped,
				"the static checks still ran; grant CREATE and DROP on the database to have InnoDB confirm them"))
		}
		return fs
	}
	if c.TriggerRefused != "" {
		for i := range fs {
			if fs[i].Check == "triggers" {
				fs[i].Severity = Blocker
				fs[i].Message = "the server refused to create a trigger again (test-compile): " + c.TriggerRefused
				fs[i].Remedy = "fix or drop the trigger (SHOW CREATE TRIGGER gives its text), then plan again"
			}
		}
	}
	if c.ErrNumber == 0 {
		// InnoDB accepted the table: a static estimate that predicted a refusal was wrong, and
		// the server's verdict wins. Keep it visible, as info, in case the estimate knows better.
		verified := map[string]bool{}
		for _, id := range compileErrorCheck {
			verified[id] = true
		}
		for i := range fs {
			if fs[i].Severity == Blocker && verified[fs[i].Check] {
				fs[i].Severity = Info
				fs[i].Message += " (but the test-compile accepted the table: InnoDB's verdict wins)"
			}
		}
		return fs
	}
	serverSays := fmt.Sprintf("InnoDB refused the shadow table: Error %d: %s", c.ErrNumber, c.ErrMessage)
	id, mapped := compileErrorCheck[c.ErrNumber]
	if !mapped {
		id = "shadow-compile"
	}
	for i := range fs {
		if fs[i].Check == id && fs[i].Severity == Blocker {
			fs[i].Message += " (confirmed by test-compile: " + serverSays + ")"
			return fs
		}
	}
	return append(fs, newFinding(id, Blocker, serverSays,
		"change the table so that it is valid for InnoDB (see the check's remedy in docs/plan/checks.md), then plan again"))
}

func init() {
	register(Check{ID: "shadow-compile", Severity: Blocker, Scope: ScopeTable,
		What: "the proposed InnoDB table is created under a scratch name with innodb_strict_mode=ON and dropped; any refusal the other checks did not predict is a blocker"})
}
