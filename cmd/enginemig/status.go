package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/planrun"
	"github.com/enginemig/enginemig/migration/state"
)

func init() { register(statusCommand) }

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show running and past migrations recorded in the state table",
		UsageText: "enginemig status [--database DB [--table T]] [--output json]",
		Description: "Reads enginemig's state table (works from another shell while apply runs, and afterwards):\n" +
			"stage, rows copied of total, changes captured, the capture's start and cut-over positions (binlog file:offset), timings, errors.",
		Flags: append(connectionFlags(),
			&cli.StringFlag{Name: "database", Aliases: []string{"D", "d"}, Usage: "only migrations of this database"},
			&cli.StringFlag{Name: "table", Aliases: []string{"t"}, Usage: "only migrations of this table (with --database)"},
			&cli.StringFlag{Name: "state-schema", Value: state.DefaultStateSchema, Usage: "schema holding enginemig's state table"},
			&cli.StringFlag{Name: "plan", Usage: "where the run of this plan file stands: each table's state, what is left, an ETA for the rest"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
		),
		Action: runStatus,
	}
}

// runStatus is the status command.
func runStatus(c *cli.Context) error {
	if c.String("table") != "" && c.String("database") == "" {
		return outcome.New(outcome.Usage, fmt.Errorf("--table needs --database"), "give both, e.g. --database game --table horses")
	}
	db, _, err := openDB(c.Context, c, "", 2)
	if err != nil {
		return err
	}
	defer db.Close()
	store := state.NewStore(db, state.Resolve(c.Context, db, c.String("state-schema"), c.String("database"), false))
	if path := c.String("plan"); path != "" {
		ps, err := planrun.StatusOf(c.Context, db, store, path, time.Now())
		if err != nil {
			return outcome.New(outcome.Usage, err, "give a plan file written by 'enginemig plan --out FILE'")
		}
		if c.String("output") == "json" {
			writeJSON(c.App.Writer, ps)
		} else {
			printPlanStatus(c.App.Writer, ps)
		}
		return nil
	}
	// A server nothing was migrated on yet has no state table: that is an empty history.
	var states []state.State
	if ok, err := store.Exists(c.Context); err != nil {
		return err
	} else if ok {
		if states, err = store.List(c.Context, c.String("database"), c.String("table")); err != nil {
			return err
		}
	}
	// Without the privilege to read it, the server's position is unknown: no capture lag then.
	views := make([]control.Status, len(states))
	for i, st := range states {
		views[i] = state.StatusOf(st, state.ServerPosition(c.Context, db, st), time.Now())
		if state.Interrupted(c.Context, db, st) {
			views[i].Interrupted = true
			views[i].Remedy = fmt.Sprintf("no enginemig runs on %s.%s any more: run the same apply again to resume, or `enginemig cleanup` to give up", st.Schema, st.Table)
		}
	}
	if c.String("output") == "json" {
		writeJSON(c.App.Writer, map[string]any{"migrations": views})
		return nil
	}
	if len(states) == 0 {
		fmt.Fprintln(c.App.Writer, "no migrations recorded")
		return nil
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTABLE\tSTAGE\tROWS\tETA\tCHANGES\tCAPTURE BEHIND\tSTARTED\tUPDATED\tCUT-OVER AT\tNOTE")
	for _, s := range views {
		rows := fmt.Sprintf("%d/%d", s.RowsCopied, s.RowsTotal)
		if s.RowsTotal > 0 {
			rows += fmt.Sprintf(" (%.0f%%)", 100*float64(s.RowsCopied)/float64(s.RowsTotal))
		}
		stage := s.Stage
		if s.DryRun {
			stage += " (dry run)"
		}
		if s.Interrupted {
			stage += " (interrupted)"
		}
		fmt.Fprintf(w, "%d\t%s.%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.MigrationID, s.Schema, s.Table, stage, rows, s.CopyETA, s.CaptureChanges,
			s.CaptureBehind, s.StartedAt.Format(time.DateTime), s.UpdatedAt.Format(time.DateTime), s.CaptureCutover, joinNotes(s.Error, s.Remedy))
	}
	return w.Flush()
}

// joinNotes joins the non-empty notes with "; ".
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

func printPlanStatus(w io.Writer, s *planrun.Status) {
	fmt.Fprintf(w, "plan: %d done, %d left", s.Done, s.Left)
	if s.Running != "" {
		fmt.Fprintf(w, ", running %s", s.Running)
	}
	if s.ETA != "" {
		fmt.Fprintf(w, ", ETA %s", s.ETA)
	}
	fmt.Fprintln(w)
	for _, t := range s.Tables {
		line := fmt.Sprintf("  %-40s %s", t.Table, t.State)
		if t.Stage != "" {
			line += " (" + t.Stage + ")"
		}
		if t.Estimate != "" {
			line += ", estimate " + t.Estimate
		}
		fmt.Fprintln(w, line)
	}
}
