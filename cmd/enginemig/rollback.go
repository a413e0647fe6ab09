package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/rollback"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/lockwait"
)

func init() { register(rollbackCommand) }

func rollbackCommand() *cli.Command {
	def := cutover.DefaultConfig()
	return &cli.Command{
		Name:      "rollback",
		Usage:     "swap a converted table back to its kept MyISAM original, keeping every write made since the cut-over",
		UsageText: "enginemig rollback --database DB --table T [--output json]",
		Description: "Replays the binlog from the cut-over position recorded by apply onto `_T_old`, then swaps the\n" +
			"tables back with the same sentry method. The InnoDB table is kept as `_T_new`. Refuses, changing\n" +
			"nothing, when the binlog since the cut-over has been purged. Non-interactive; exit codes as for apply.",
		Flags: append(connectionFlags(),
			&cli.StringFlag{Name: "database", Aliases: []string{"D", "d"}, Usage: "database (schema) of the table (required)"},
			&cli.StringFlag{Name: "table", Aliases: []string{"t"}, Usage: "the converted table (required)"},
			&cli.StringFlag{Name: "state-schema", Value: state.DefaultStateSchema, Usage: "schema holding enginemig's state table"},
			&cli.DurationFlag{Name: "cutover-lock-wait", Value: def.LockWait, Usage: "how long one swap attempt may wait for the table lock"},
			&cli.DurationFlag{Name: "lock-timeout", Value: lockwait.DefaultTimeout, Usage: "how long one statement may wait for a lock another session holds before the rollback stops with nothing swapped (exit 6); the wait and its holder are logged from the first second"},
			&cli.DurationFlag{Name: "cutover-timeout", Value: def.Timeout, Usage: "how long to keep retrying the swap back before giving up (the InnoDB table stays live; run rollback again)"},
			&cli.IntFlag{Name: "cutover-attempts", Value: def.Attempts, Usage: "swap attempts before giving up (0: no limit but --cutover-timeout)"},
			&cli.UintFlag{Name: "server-id", Usage: "server_id for the binlog connection (default: random)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
		),
		Action: func(c *cli.Context) error {
			if err := requireFlags(c, "database", "table"); err != nil {
				return err
			}
			if c.String("output") != "text" && c.String("output") != "json" {
				return outcome.Errorf(outcome.Usage, "--output must be text or json")
			}
			db, conn, err := openDB(c.Context, c, "", preflight.Pool)
			if err != nil {
				return err
			}
			defer db.Close()
			cfg := def
			cfg.LockWait, cfg.Attempts, cfg.Timeout = c.Duration("cutover-lock-wait"), c.Int("cutover-attempts"), c.Duration("cutover-timeout")
			logger := loggerOf(c).With(slog.String("table", c.String("database")+"."+c.String("table")), slog.String("command", "rollback"))
			res, err := rollback.Run(c.Context, db, rollback.Options{Conn: conn, Schema: c.String("database"),
				Table: c.String("table"), StateSchema: c.String("state-schema"), Cutover: cfg, ServerID: uint32(c.Uint("server-id")), Logger: logger,
				LockTimeout: c.Duration("lock-timeout")})
			if c.String("output") == "json" {
				out := map[string]any{"result": res, "exit_code": int(outcome.CodeOf(err)), "status": outcome.CodeOf(err).Name()}
				if err != nil {
					out["error"] = err.Error()
				}
				writeJSON(c.App.Writer, out)
			}
			if err != nil {
				return err
			}
			if c.String("output") == "text" {
				fmt.Fprintf(c.App.Writer, "rolled back %s.%s: %d changes made since the cut-over captured onto the MyISAM table; swap took %d attempt(s), table locked %s; the InnoDB table is kept as %s.%s\n",
					res.Schema, res.Table, res.CaptureChanges, res.Cutover.Attempts, res.Cutover.LockHeld.Round(time.Millisecond), res.Schema, res.InnoDBTable)
			}
			return nil
		},
	}
}
