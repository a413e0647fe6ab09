package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/outcome"
)

func init() { register(statusCommand) }

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show running and past migrations recorded in the state table",
		UsageText: "enginemig status [--database DB [--table T]] [--output json]",
		Description: "Reads enginemig's state table (works from another shell while apply runs, and afterwards):\n" +
			"stage, rows copied of total, changes replayed, binlog start and cut-over positions, timings, errors.",
		Flags: append(connectionFlags(),
			&cli.StringFlag{Name: "database", Aliases: []string{"D"}, Usage: "only migrations of this database"},
			&cli.StringFlag{Name: "table", Aliases: []string{"t"}, Usage: "only migrations of this table (with --database)"},
			&cli.StringFlag{Name: "state-schema", Value: migration.DefaultStateSchema, Usage: "schema holding enginemig's state table"},
			&cli.StringFlag{Name: "output", Value: "text", Usage: "text or json"},
		),
		Action: func(c *cli.Context) error {
			db, _, err := openDB(c.Context, c, "", 2)
			if err != nil {
				return err
			}
			defer db.Close()
			states, err := migration.NewStore(db, c.String("state-schema")).List(c.Context, c.String("database"), c.String("table"))
			if err != nil {
				return outcome.New(outcome.Usage, err, "no migrations recorded yet, or a different --state-schema")
			}
			now, _ := binlog.CurrentPosition(c.Context, db)
			views := make([]statusView, len(states))
			for i, st := range states {
				views[i] = viewOf(st, now, time.Now())
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
			fmt.Fprintln(w, "ID\tTABLE\tSTAGE\tROWS\tETA\tCHANGES\tREPLAY BEHIND\tSTARTED\tUPDATED\tCUT-OVER AT\tNOTE")
			for i, s := range states {
				v := views[i]
				rows := fmt.Sprintf("%d/%d", s.RowsCopied, s.RowsTotal)
				if s.RowsTotal > 0 {
					rows += fmt.Sprintf(" (%.0f%%)", 100*float64(s.RowsCopied)/float64(s.RowsTotal))
				}
				stage := s.Stage
				if s.DryRun {
					stage += " (dry run)"
				}
				cut := ""
				if s.CutoverFile != "" {
					cut = fmt.Sprintf("%s:%d", s.CutoverFile, s.CutoverPos)
				}
				fmt.Fprintf(w, "%d\t%s.%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Schema, s.Table, stage, rows, v.ETA, s.EventsApplied,
					v.ReplayBehind, s.StartedAt.Format(time.DateTime), s.UpdatedAt.Format(time.DateTime), cut, s.Error)
			}
			return w.Flush()
		},
	}
}

// statusView is a recorded migration plus what can be derived from it now.
type statusView struct {
	migration.State
	// ETA of the copy, from the copy rate so far (empty when not copying).
	ETA string `json:"copy_eta,omitempty"`
	// ReplayBehind is how far the last saved replay position trails the server's binlog.
	ReplayBehind      string `json:"replay_behind,omitempty"`
	ReplayBehindBytes int64  `json:"replay_behind_bytes,omitempty"`
}

func viewOf(st migration.State, serverPos binlog.Position, now time.Time) statusView {
	v := statusView{State: st}
	if st.FinishedAt != nil {
		return v
	}
	if st.Stage == migration.StageCopy && st.RowsCopied > 0 && st.RowsTotal > st.RowsCopied {
		elapsed := st.UpdatedAt.Sub(st.StartedAt).Seconds()
		if elapsed > 0 {
			rate := float64(st.RowsCopied) / elapsed
			v.ETA = time.Duration(float64(st.RowsTotal-st.RowsCopied) / rate * float64(time.Second)).Round(time.Second).String()
		}
	}
	switch {
	case st.AppliedFile == "" || serverPos.Name == "":
	case st.AppliedFile == serverPos.Name && serverPos.Pos >= st.AppliedPos:
		v.ReplayBehindBytes = int64(serverPos.Pos - st.AppliedPos)
		v.ReplayBehind = fmt.Sprintf("%d bytes", v.ReplayBehindBytes)
	default:
		v.ReplayBehind = fmt.Sprintf("from %s:%d (server at %s)", st.AppliedFile, st.AppliedPos, serverPos)
	}
	return v
}
