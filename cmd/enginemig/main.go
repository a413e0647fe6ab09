// Command enginemig converts MySQL/MariaDB tables from MyISAM to InnoDB online. This package only
// wires flags to the packages that do the work; see README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

// version is set at build time with -ldflags "-X main.version=..."; "dev" otherwise.
var version = "dev"

func main() {
	if os.Getenv("GOGC") == "" {
		// The heap is small and mostly short-lived row images from the binlog: collecting it at
		// the default pace spends CPU the database server on the same machine needs more than
		// enginemig needs the memory (docs/bench/constants.md). GOGC in the environment still
		// decides.
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args))
}

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app := newApp()
	err := app.RunContext(ctx, args)
	if err == nil {
		return 0
	}
	code := outcome.CodeOf(err)
	fmt.Fprintf(os.Stderr, "enginemig: %v\n", err)
	return int(code)
}

func newApp() *cli.App {
	app := &cli.App{
		Name:                 "enginemig",
		Usage:                "convert MySQL/MariaDB tables from MyISAM to InnoDB online",
		Version:              version,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		Description: "enginemig finds MyISAM tables (plan), converts them to InnoDB while the application keeps\n" +
			"reading and writing (apply), and benchmarks both engines with the production query mix (bench).\n" +
			"Exit codes: 0 ok, 1 internal error, 2 usage, 3 connection, 4 refused (blocker; nothing changed),\n" +
			"5 gate failed, 6 migration failed (original table in place), 7 needs attention,\n" +
			"8 cut-over pending (copy done and kept; run the same apply again to swap), 9 plan --check\n" +
			"found MyISAM tables of the application's.",
		Commands: commands(),
		// The log flags are global (enginemig --log-level debug apply ...); the logger is built
		// once here and passed down by every command.
		Flags:  logFlags(),
		Before: setupLogging,
		// Flag parse errors are usage errors: exit 2, not 1.
		OnUsageError: func(cCtx *cli.Context, err error, isSubcommand bool) error {
			return outcome.New(outcome.Usage, err, "see --help")
		},
	}
	return app
}
