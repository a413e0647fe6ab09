package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

// commands lists the subcommands; each lives in its own file (plan.go, apply.go, bench.go, ...).
func commands() []*cli.Command {
	var cmds []*cli.Command
	for _, c := range registered {
		cmd := c()
		if cmd.OnUsageError == nil {
			// The app's OnUsageError covers only its own flags; a subcommand's bad flag is a
			// usage error (exit 2) too.
			cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
				return outcome.New(outcome.Usage, err, "see --help")
			}
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// registered is filled by each command file's init, so files can be added without touching this one.
var registered []func() *cli.Command

func register(c func() *cli.Command) { registered = append(registered, c) }

// requireFlags is a usage error (exit 2) naming the flags that were not given. Commands check
// this themselves rather than with urfave's Required, whose error bypasses OnUsageError.
func requireFlags(c *cli.Context, names ...string) error {
	var missing []string
	for _, n := range names {
		if c.String(n) == "" {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return outcome.Errorf(outcome.Usage, "%s required", strings.Join(missing, " and "))
	}
	return nil
}
