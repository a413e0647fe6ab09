// Package preflight holds the checks a run makes before it changes anything: how changes can be
// captured on the server, whether the table can be converted, plan's blockers; each refusal says
// what to do.
package preflight

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/plan"
	"github.com/enginemig/enginemig/shadow"
)

// Pool is the size of the pool apply and rollback run on (the caller opens it): the stages'
// statements, the cut-over's lock sessions, the throttle's probes and heartbeat, the gates.
const Pool = 8

// Connections is the most connections apply or rollback holds on the server at once with workers
// copy workers and tables converted at once (apply --plan --parallel; 0 or 1: one): Pool, shared,
// and each table's pipeline (shadow.Connections) and advisory lock (state.Lock). The
// account-limits check holds it against the account's MAX_USER_CONNECTIONS, and a test holds
// apply to it.
func Connections(workers, tables int) int {
	return Pool + max(tables, 1)*(shadow.Connections(workers)+1)
}

// Refuse builds a preflight refusal: nothing has been changed when it is returned.
func Refuse(remedy, format string, args ...any) error {
	return outcome.New(outcome.Refused, fmt.Errorf(format, args...), remedy)
}

// CheckServer decides how changes are captured (want: auto, binlog or triggers; see
// plan.ChooseCapture) and refuses when that capture cannot work on this server.
func CheckServer(ctx context.Context, db *sql.DB, want string) (version string, mode shadow.Mode, why string, err error) {
	version, got, why, err := plan.CaptureFor(ctx, db, want)
	if err != nil && dbconn.IsConnectionLoss(err) {
		return version, "", "", outcome.New(outcome.Connection, err, "check that the server is up and reachable, then run the same apply again")
	}
	if refusal := (*plan.CaptureRefusal)(nil); errors.As(err, &refusal) {
		return version, "", "", Refuse(refusal.Remedy(), "%v", err)
	}
	if err != nil {
		return version, "", "", Refuse("use --capture auto, binlog or triggers", "%v", err)
	}
	return version, shadow.Mode(got), why, nil
}

// CheckTable verifies that ti can be migrated online and that no leftovers are in the way.
func CheckTable(ctx context.Context, db *sql.DB, ti *table.Info) error {
	name := ti.QuotedName()
	switch {
	case ti.Type != "BASE TABLE":
		return Refuse("only base tables can be converted", "%s is a %s, not a table", name, strings.ToLower(ti.Type))
	case strings.EqualFold(ti.Engine, "InnoDB"):
		return Refuse("nothing to do", "%s is already InnoDB", name)
	case !strings.EqualFold(ti.Engine, "MyISAM"):
		return Refuse("enginemig converts MyISAM tables only", "%s uses engine %s, not MyISAM", name, ti.Engine)
	}
	// A usable key, name lengths and triggers are plan checks (no-usable-key, name-too-long,
	// triggers), which PlanBlockers runs next; only what plan does not cover is checked here.
	for _, leftover := range []string{table.ShadowName(ti.Name), table.OldName(ti.Name), table.SwapName(ti.Name)} {
		_, err := table.Load(ctx, db, ti.Schema, leftover)
		if errors.Is(err, table.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		return Refuse(fmt.Sprintf("if no enginemig is running on it, inspect and drop it: DROP TABLE %s (a %s is the kept original of an earlier conversion: drop it only when you no longer need to roll back)",
			dbconn.QualifiedName(ti.Schema, leftover), table.OldName(ti.Name)),
			"%s exists: a leftover of an earlier or running migration", dbconn.QualifiedName(ti.Schema, leftover))
	}
	return nil
}

// PlanBlockers runs plan's server and table checks (the same ones `enginemig plan` reports) and
// refuses when any is a blocker. Warnings are logged: the DBA has seen them in the plan. It
// returns the server as the checks read it (once, for both) and plan's copy estimate of the
// table (zero when there is none). cat is a whole run's server-wide lookups (nil: read here).
func PlanBlockers(ctx context.Context, db *sql.DB, ti *table.Info, capture shadow.Mode, connections int, cat *plan.Catalog, maxHold time.Duration, log *slog.Logger) (*plan.ServerInfo, plan.Estimate, error) {
	srv, serverFindings, err := plan.CheckServer(ctx, db, string(capture), connections, cat)
	if err != nil {
		return nil, plan.Estimate{}, fmt.Errorf("server checks: %w", err)
	}
	findings, estimate, err := plan.CheckTable(ctx, db, srv, cat, ti.Schema, ti.Name, maxHold)
	if err != nil {
		return nil, plan.Estimate{}, fmt.Errorf("table checks: %w", err)
	}
	all := append(serverFindings, findings...)
	for _, f := range all {
		if f.Severity == plan.Warning {
			log.Warn(f.Message, "check", f.Check)
		}
	}
	if b := plan.Blockers(all); len(b) > 0 {
		var msgs, remedies []string
		for _, f := range b {
			msgs = append(msgs, fmt.Sprintf("[%s] %s", f.Check, f.Message))
			if f.Remedy != "" {
				remedies = append(remedies, f.Remedy)
			}
		}
		return nil, plan.Estimate{}, Refuse(strings.Join(remedies, "; "), "%s has %d blocker(s): %s", ti.QuotedName(), len(b), strings.Join(msgs, "; "))
	}
	return srv, estimate, nil
}

// LoadTable reads the table, mapping "not found" to a usage error.
func LoadTable(ctx context.Context, db *sql.DB, schema, name string) (*table.Info, error) {
	ti, err := table.Load(ctx, db, schema, name)
	if errors.Is(err, table.ErrNotFound) {
		var exists int
		db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", schema).Scan(&exists)
		if exists == 0 {
			return nil, outcome.New(outcome.Usage, fmt.Errorf("database %s does not exist", dbconn.QuoteIdent(schema)), "check --database")
		}
		return nil, outcome.New(outcome.Usage, fmt.Errorf("table %s does not exist", dbconn.QualifiedName(schema, name)), "check --table")
	}
	return ti, err
}
