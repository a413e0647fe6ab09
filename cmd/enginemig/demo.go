package main

import (
	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/cmd/enginemig/demo"
	"github.com/enginemig/enginemig/internal/db/outcome"
)

func init() { register(demoCommand) }

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "a guided tour on a private MariaDB server: seed MyISAM tables, run live load, plan, benchmark, apply, check that nothing was lost",
		UsageText: "enginemig demo [--rows N] [--keep] [--output json]\n" +
			"   enginemig demo --host H --user U ... [--database enginemig_demo]   (uses a scratch database on that server)",
		Description: "Without connection flags the demo starts its own mariadbd (from the mariadb-server package) on a free\n" +
			"port in a temporary directory and removes it afterwards. It seeds players' horses (--rows), fish,\n" +
			"babies and one table plan must refuse; runs an application (16 SELECT : 7 UPDATE : 1 INSERT by\n" +
			"primary key) for the whole tour; shows plan, the before-copy benchmark gate (chart written to\n" +
			"--chart), apply with its cut-over; and checks every write the server acknowledged against the final\n" +
			"table. Exit 0 only when the table was converted, the application saw no error and nothing was lost.",
		Flags: append(connectionFlags(),
			&cli.StringFlag{Name: "database", Aliases: []string{"D", "d"}, Value: demo.DefaultDatabase, Usage: "with connection flags: the scratch database to create, use and drop (must not exist or be empty)"},
			&cli.Int64Flag{Name: "rows", Value: demo.DefaultRows, Usage: "rows in the horses table (the one converted)"},
			&cli.IntFlag{Name: "threads", Value: demo.DefaultThreads, Usage: "application threads"},
			&cli.IntFlag{Name: "rate", Value: demo.DefaultRate, Usage: "application queries/s in total (real applications have think time); 0 for as fast as possible"},
			&cli.IntSliceFlag{Name: "gate-threads", Value: cli.NewIntSlice(demo.DefaultGateThreads...), Usage: "thread counts of the before-copy benchmark sweep"},
			&cli.DurationFlag{Name: "gate-duration", Value: demo.DefaultGateDuration, Usage: "measurement time per engine and thread count"},
			&cli.IntFlag{Name: "gate-sample-rows", Value: demo.DefaultGateSample, Usage: "rows copied into the benchmark's scratch tables"},
			&cli.StringFlag{Name: "chart", Value: demo.DefaultChart, Usage: "where to write the benchmark chart (.html, .svg or .png)"},
			&cli.DurationFlag{Name: "chunk-time", Usage: "copy chunk target duration (default: apply's)"},
			&cli.BoolFlag{Name: "rollback", Usage: "after the cut-over, also roll the conversion back (lossless, while the application writes) and check that too"},
			&cli.BoolFlag{Name: "skip-verify", Usage: "skip apply's chunk-by-chunk verification before the cut-over (the demo's own check of every acknowledged write still runs)"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the sandbox server running (or the scratch database) afterwards and print how to connect"},
			&cli.StringFlag{Name: "sandbox-dir", Usage: "put the sandbox server's files here instead of a temporary directory"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text, or json: the walkthrough goes to stderr and the summary to stdout as JSON"},
		),
		Action: runDemo,
	}
}

// connectionFlagNames are the flags that point the demo at an existing server.
var connectionFlagNames = []string{"host", "port", "socket", "user", "password", "ask-password", "defaults-file"}

func runDemo(c *cli.Context) error {
	output := c.String("output")
	if output != "text" && output != "json" {
		return outcome.Errorf(outcome.Usage, "--output %q: want text or json", output)
	}
	if c.Args().Len() > 0 {
		return outcome.Errorf(outcome.Usage, "unexpected arguments %v", c.Args().Slice())
	}
	if c.Int64("rows") < 1000 {
		return outcome.Errorf(outcome.Usage, "--rows must be at least 1000")
	}
	cfg := demo.Config{Out: c.App.Writer, Database: c.String("database"), Keep: c.Bool("keep"), SandboxDir: c.String("sandbox-dir"),
		Rows: c.Int64("rows"), Threads: c.Int("threads"), Rate: c.Int("rate"), GateThreads: c.IntSlice("gate-threads"),
		GateDuration: c.Duration("gate-duration"), GateSample: c.Int("gate-sample-rows"), Chart: c.String("chart"),
		ChunkTime: c.Duration("chunk-time"), Rollback: c.Bool("rollback"), SkipVerify: c.Bool("skip-verify"), Tool: version,
		Logger: loggerOf(c)}
	if cfg.Rate == 0 {
		cfg.Rate = -1 // unpaced
	}
	if output == "json" {
		cfg.Out = c.App.ErrWriter
	}
	for _, n := range connectionFlagNames {
		if c.IsSet(n) {
			conn, err := connectionConfig(c)
			if err != nil {
				return err
			}
			cfg.Conn = &conn
			break
		}
	}
	sum, err := demo.Run(c.Context, cfg)
	if sum != nil {
		if output == "json" {
			writeJSON(c.App.Writer, sum)
		} else {
			sum.WriteText(c.App.Writer)
		}
	}
	return err
}
