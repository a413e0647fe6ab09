package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/migration/cleanup"
	"github.com/enginemig/enginemig/migration/state"
)

func init() { register(cleanupCommand) }

func cleanupCommand() *cli.Command {
	return &cli.Command{
		Name:      "cleanup",
		Usage:     "remove what an interrupted or finished migration left behind (_T_new, a cut-over sentry; with --drop-old the kept original)",
		UsageText: "enginemig cleanup --database DB --table T [--drop-old]",
		Description: "Refuses while an enginemig apply runs on the table. An interrupted apply can usually be resumed\n" +
			"instead: run the same apply again. `_T_old` (the MyISAM original) is only dropped with --drop-old,\n" +
			"which ends the possibility of `enginemig rollback`.",
		Flags: append(connectionFlags(),
			&cli.StringFlag{Name: "database", Aliases: []string{"D", "d"}, Usage: "database (schema) of the table"},
			&cli.StringFlag{Name: "table", Aliases: []string{"t"}, Usage: "the table whose leftovers to remove"},
			&cli.BoolFlag{Name: "drop-old", Usage: "also drop the kept original _T_old (no rollback possible afterwards)"},
			&cli.StringFlag{Name: "state-schema", Value: state.DefaultStateSchema, Usage: "schema holding enginemig's state table"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
		),
		Action: func(c *cli.Context) error {
			if err := requireFlags(c, "database", "table"); err != nil {
				return err
			}
			db, conn, err := openDB(c.Context, c, "", 4)
			if err != nil {
				return err
			}
			defer db.Close()
			res, err := cleanup.Run(c.Context, db, cleanup.Options{Conn: conn, Schema: c.String("database"),
				Table: c.String("table"), StateSchema: c.String("state-schema"), DropOld: c.Bool("drop-old")})
			if err != nil {
				return err
			}
			if c.String("output") == "json" {
				writeJSON(c.App.Writer, res)
				return nil
			}
			if len(res.Dropped) == 0 {
				fmt.Fprintln(c.App.Writer, "nothing to clean up")
			} else {
				fmt.Fprintf(c.App.Writer, "dropped: %s\n", strings.Join(res.Dropped, ", "))
			}
			for _, k := range res.Kept {
				fmt.Fprintf(c.App.Writer, "kept: %s\n", k)
			}
			return nil
		},
	}
}
