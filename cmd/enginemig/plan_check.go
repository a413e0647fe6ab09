package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration/planrun"
	"github.com/enginemig/enginemig/plan"
)

// checkReport is plan --check's answer (--output json).
type checkReport struct {
	MyISAMTables []plan.Leftover `json:"myisam_tables"`
	// ApplicationTables counts the tables that fail the check (kept originals do not).
	ApplicationTables int             `json:"application_tables"`
	Scope             string          `json:"scope"`
	KeepMyISAMOut     []plan.DoorStep `json:"keep_myisam_out,omitempty"`
}

// runPlanCheck lists the MyISAM tables left, exiting MyISAMRemains when any is the application's:
// a nightly job's or CI's check that the estate stays converted. With none left it says how to
// keep new ones out.
func runPlanCheck(c *cli.Context, output string) error {
	if c.Args().Len() > 0 {
		return outcome.New(outcome.Usage, fmt.Errorf("unexpected arguments %v", c.Args().Slice()), "use --database to limit the check")
	}
	db, _, err := openDB(c.Context, c, "", 2)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := checkLeftovers(c.Context, db, c.StringSlice("database"))
	if err != nil {
		return fmt.Errorf("plan --check: %w", err)
	}
	w := c.App.Writer
	if w == nil {
		w = os.Stdout
	}
	if output == "json" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	} else {
		writeCheck(w, r)
	}
	if r.ApplicationTables > 0 {
		return outcome.New(outcome.MyISAMRemains, fmt.Errorf("%d MyISAM table(s) of the application remain", r.ApplicationTables), plan.CheckRemedy(r.MyISAMTables))
	}
	return nil
}

// checkLeftovers is plan --check's report on dbs (none: every database the account sees), with
// how to keep MyISAM out when none of the application's is left.
func checkLeftovers(ctx context.Context, db *sql.DB, dbs []string) (checkReport, error) {
	ls, err := plan.Leftovers(ctx, db, dbs)
	if err != nil {
		return checkReport{}, err
	}
	r := checkReport{MyISAMTables: ls, ApplicationTables: plan.ApplicationTables(ls),
		Scope: "every database this account can see, outside mysql, sys, performance_schema and information_schema"}
	if len(dbs) > 0 {
		r.Scope = "the databases " + strings.Join(dbs, ", ")
	}
	if r.MyISAMTables == nil {
		r.MyISAMTables = []plan.Leftover{}
	}
	if r.ApplicationTables == 0 {
		var version string
		if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return r, err
		}
		flavor := "mysql"
		if dbconn.MariaDB(version) {
			flavor = "mariadb"
		}
		r.KeepMyISAMOut = plan.KeepMyISAMOut(flavor)
	}
	return r, nil
}

// doorAfterPlan is what apply --plan says once every table of the plan is converted: the MyISAM
// tables still in the plan's databases, or how to keep MyISAM out. nil when it cannot tell (the
// run's outcome stands; plan --check says it later).
func doorAfterPlan(c *cli.Context, db *sql.DB, targets []planrun.Target) *checkReport {
	seen := map[string]bool{}
	var dbs []string
	for _, t := range targets {
		if !seen[t.Schema] {
			seen[t.Schema] = true
			dbs = append(dbs, t.Schema)
		}
	}
	if len(dbs) == 0 {
		return nil
	}
	sort.Strings(dbs)
	r, err := checkLeftovers(c.Context, db, dbs)
	if err != nil {
		loggerOf(c).Warn("could not list the MyISAM tables left (enginemig plan --check lists them)", "error", err)
		return nil
	}
	return &r
}

func writeCheck(w io.Writer, r checkReport) {
	fmt.Fprintf(w, "Checked %s.\n", r.Scope)
	if r.ApplicationTables == 0 {
		fmt.Fprintln(w, "No MyISAM table of the application's remains.")
	}
	for _, l := range r.MyISAMTables {
		what := "still " + l.Engine
		if l.KeptOriginal {
			what = "the original kept for a rollback (enginemig cleanup -D " + l.Schema + " -t " + l.Table[1:len(l.Table)-4] + " --drop-old ends that window)"
		}
		fmt.Fprintf(w, "  %s.%s: %s, %d rows, %s\n", l.Schema, l.Table, what, l.Rows, plan.Human(l.Bytes))
	}
	if len(r.KeepMyISAMOut) == 0 {
		return
	}
	fmt.Fprintln(w, "\nTo keep MyISAM out of this server (existing tables stay readable and writable with each):")
	for _, s := range r.KeepMyISAMOut {
		fmt.Fprintf(w, "  %s: %s\n    run: %s\n", s.Setting, s.What, s.Statement)
		if s.Persistent != "" {
			fmt.Fprintf(w, "    keep across restarts: %s\n", s.Persistent)
		}
		fmt.Fprintf(w, "    breaks: %s\n", s.Breaks)
	}
}
