package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration/control"
)

func init() { register(controlCommand) }

func controlCommand() *cli.Command {
	return &cli.Command{
		Name:      "control",
		Usage:     "steer a running apply: pause, resume, abort, release the cut-over, change chunk time and throttle limits",
		UsageText: "enginemig control --socket PATH COMMAND",
		Description: "Sends one command to the control socket of a running `enginemig apply` and prints its reply\n" +
			"(status: JSON). See docs/control.md. Commands:\n   " +
			strings.Join(control.HelpLines(), "\n   ") + "\n" +
			"Exit codes: 0 done, 1 socket unreachable (no apply running with that socket?), 2 bad or refused command.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "control socket of the running apply (the path apply was given); required"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "give up when the apply does not answer within this time"},
		},
		Action: func(c *cli.Context) error {
			// Checked here rather than with Required: a missing required flag would exit 1, not 2.
			if c.String("socket") == "" {
				return outcome.Errorf(outcome.Usage, "control needs --socket PATH (the control socket the apply listens on)")
			}
			if c.NArg() != 1 {
				return outcome.Errorf(outcome.Usage, "control needs exactly one COMMAND (got %d): %s", c.NArg(), control.CommandNames())
			}
			command := c.Args().First()
			// Checked here too so a typo is reported as such even when no apply is running.
			cmd, err := control.Parse(command)
			if err != nil {
				return outcome.New(outcome.Usage, err, "")
			}
			ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
			defer cancel()
			var reply string
			var st control.Status
			if cmd.Name == "status" {
				st, err = control.GetStatus(ctx, c.String("socket"))
			} else {
				reply, err = control.Send(ctx, c.String("socket"), command)
			}
			var refused *control.RemoteError
			switch {
			case errors.As(err, &refused):
				return outcome.New(outcome.Usage, fmt.Errorf("apply refused %q: %w", command, err), "")
			case err != nil:
				return outcome.New(outcome.Internal, err, "")
			}
			if cmd.Name == "status" {
				// Indented for people, still JSON for jq; the same fields as `enginemig status`.
				writeJSON(c.App.Writer, st)
				return nil
			}
			fmt.Fprintln(c.App.Writer, reply)
			return nil
		},
	}
}
