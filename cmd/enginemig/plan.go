package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/plan"
)

func init() { register(planCommand) }

func planCommand() *cli.Command {
	flags := append(connectionFlags(),
		&cli.StringSliceFlag{Name: "database", Aliases: []string{"d", "D"},
			Usage: "database(s) whose MyISAM tables to plan; repeat or separate with commas (mysql, sys, performance_schema and information_schema are refused)"},
		&cli.StringSliceFlag{Name: "tables", Aliases: []string{"t"},
			Usage: "only these tables: names or shell patterns (orders, log_*, shop.cart_?), repeat or separate with commas; default all MyISAM tables"},
		&cli.BoolFlag{Name: "no-test-compile",
			Usage: "write nothing: skip creating each proposed InnoDB table under a scratch name to let InnoDB confirm it (the static checks still run)"},
		&cli.Int64Flag{Name: "sample-rows", Value: plan.DefaultSampleRows,
			Usage: "rows read per table, by key, to measure the copy rate for the time estimate (MyISAM holds a read lock for the few milliseconds this takes)"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text",
			Usage: "what to print: text (a readable report), markdown (a document for a change ticket or a wiki) or json (the plan file, for scripts)"},
		captureFlag(),
		&cli.StringSliceFlag{Name: "node",
			Usage: "Galera: a node's SQL address (host:port), repeated for each node, where plan counts each table's rows with this account; default: wsrep_incoming_addresses"},
		maxHoldFlag(),
		&cli.StringFlag{Name: "out",
			Usage: "also write the plan file (JSON, versioned) to this path, for apply --plan"},
		&cli.BoolFlag{Name: "check",
			Usage: "a nightly check: list the MyISAM tables left (of --database, or all the account sees), exit 9 if any; with none, how to keep MyISAM out"},
	)
	return &cli.Command{
		Name:  "plan",
		Usage: "find MyISAM tables, check them for InnoDB, estimate size and time, rank by lock contention (read-only)",
		Description: "plan reads the server and never changes it, except that it creates each proposed InnoDB table\n" +
			"empty under a scratch name and drops it again (--no-test-compile turns that off).\n" +
			"Exit codes: 0 no blockers, 4 a table or the server has a blocker, 2 usage (bad flags, unknown\n" +
			"database), 3 cannot connect; with --check: 0 no MyISAM table of the application's, 9 some.\n" +
			"See docs/plan.md.",
		Flags:  flags,
		Action: runPlan,
		// The app's OnUsageError covers only its own flags; a subcommand's bad flag is a usage error too.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return outcome.New(outcome.Usage, err, "see enginemig plan --help")
		},
	}
}

func runPlan(c *cli.Context) error {
	output := c.String("output")
	if output != "text" && output != "json" && output != "markdown" {
		return outcome.New(outcome.Usage, fmt.Errorf("--output %q: want text, markdown or json", output), "")
	}
	if c.Bool("check") {
		return runPlanCheck(c, output)
	}
	// Checked here rather than with Required: urfave's missing-flag error carries no exit code.
	if len(c.StringSlice("database")) == 0 {
		return outcome.New(outcome.Usage, fmt.Errorf("plan needs --database"), "name the database(s) whose MyISAM tables to plan")
	}
	if c.Args().Len() > 0 {
		return outcome.New(outcome.Usage, fmt.Errorf("unexpected arguments %v", c.Args().Slice()), "use --database and --tables")
	}
	db, cfg, err := openDB(c.Context, c, "", 4)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := plan.Inspect(c.Context, db, plan.Options{
		Nodes:            c.StringSlice("node"),
		OpenNode:         plan.OpenWithAccount(cfg),
		Databases:        c.StringSlice("database"),
		Tables:           c.StringSlice("tables"),
		TestCompile:      !c.Bool("no-test-compile"),
		SampleRows:       c.Int64("sample-rows"),
		Capture:          c.String("capture"),
		MaxHold:          c.Duration("max-hold"),
		ApplyConnections: preflight.Connections(migration.DefaultCopyWorkers, 1),
		Tool:             version,
		Logger:           loggerOf(c),
	})
	if err != nil {
		if errors.Is(err, plan.ErrUnknownDatabase) || errors.Is(err, plan.ErrSystemSchema) || errors.Is(err, plan.ErrNoMatch) {
			return outcome.New(outcome.Usage, err, "check --database and --tables")
		}
		return fmt.Errorf("plan: %w", err)
	}
	if path := c.String("out"); path != "" {
		if err := plan.WriteFile(path, p); err != nil {
			return err
		}
	}
	w := c.App.Writer
	if w == nil {
		w = os.Stdout
	}
	if output == "json" {
		b, err := plan.Marshal(p)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	} else if output == "markdown" {
		if err := plan.WriteMarkdown(w, p); err != nil {
			return err
		}
	} else if err := plan.WriteText(w, p); err != nil {
		return err
	}
	if p.HasBlockers() {
		return outcome.New(outcome.Refused, fmt.Errorf("plan found %d blocker(s)", p.Summary.Blockers),
			"fix them (see each remedy) and run plan again")
	}
	return nil
}
