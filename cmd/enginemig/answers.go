package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration"
)

func init() { register(answersCommand) }

func answersCommand() *cli.Command {
	const cat = "Answers"
	flags := append(connectionFlags(),
		&cli.StringFlag{Name: "database", Aliases: []string{"D", "d"}, Usage: "database (schema) of the table (required)", Category: cat},
		&cli.StringFlag{Name: "table", Aliases: []string{"t"}, Usage: "MyISAM table whose statements to check (required)", Category: cat},
		&cli.StringFlag{Name: "statements", Usage: "read the statements from FILE (each ending with ';', or one per line) instead of performance_schema", Category: cat},
		&cli.StringFlag{Name: "from-log", Usage: "read the statements on the table from this slow or general query log instead of performance_schema", Category: cat},
		&cli.StringFlag{Name: "accept", Usage: "FILE of accepted statement digests (one per line, as this command prints them): their new answers do not fail the check", Category: cat},
		&cli.Int64Flag{Name: "rows", Value: answers.DefaultRows, Usage: "rows copied (in the table's data-file order) into the MyISAM and InnoDB scratch copies; 0: all", Category: cat},
		&cli.StringFlag{Name: "scratch-database", Value: answers.DefaultScratchDB, Usage: "database for the scratch copies (dropped afterwards; the database stays)", Category: cat},
		&cli.BoolFlag{Name: "native", Usage: "compare with a plain ALTER TABLE ... ENGINE=InnoDB, whose FULLTEXT indexes keep InnoDB's stopwords (apply gives them MyISAM's)", Category: cat},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "report format: text or json", Category: cat},
	)
	return &cli.Command{
		Name:  "answers",
		Usage: "run the application's reads on MyISAM and InnoDB copies of a table and name each whose answer changes",
		Description: "Copies the table (in its data-file order) into a MyISAM and an InnoDB scratch table, runs each of\n" +
			"the application's SELECTs on the table on both, and prints every statement whose rows or their order\n" +
			"differ, with the cause (FULLTEXT stopwords, token sizes, 50% threshold, ranking; LIMIT or order without\n" +
			"ORDER BY) and the remedy. The live table is only read, a batch at a time. Exit 5 when a statement's\n" +
			"answer changes and its digest is not in --accept. See docs/plan.md, \"Answers that change\".",
		Flags:  flags,
		Action: runAnswers,
	}
}

func runAnswers(c *cli.Context) error {
	if err := requireFlags(c, "database", "table"); err != nil {
		return err
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return outcome.Errorf(outcome.Usage, "--output %q: want text or json", format)
	}
	if c.String("statements") != "" && c.String("from-log") != "" {
		return outcome.Errorf(outcome.Usage, "give --statements or --from-log, not both")
	}
	if c.Int64("rows") < 0 {
		return outcome.Errorf(outcome.Usage, "--rows must not be negative")
	}
	var accepted map[string]bool
	if path := c.String("accept"); path != "" {
		var err error
		if accepted, err = answers.ReadAccepted(path); err != nil {
			return outcome.New(outcome.Usage, err, "")
		}
	}
	schema, name := c.String("database"), c.String("table")
	var stmts []string
	var err error
	switch {
	case c.String("statements") != "":
		stmts, err = answers.FromFile(c.String("statements"))
	case c.String("from-log") != "":
		stmts, err = answers.FromLog(c.String("from-log"), schema, name)
	}
	if err != nil {
		return outcome.New(outcome.Usage, err, "")
	}
	db, _, err := openDB(c.Context, c, "", 4)
	if err != nil {
		return err
	}
	defer db.Close()
	if stmts == nil {
		if stmts, err = answers.FromServer(c.Context, db, schema, name); err != nil {
			return outcome.New(outcome.Refused, err, "give the statements with --statements FILE or --from-log FILE")
		}
	}
	rep, err := answers.Run(c.Context, db, schema, name, stmts, answers.Options{Scratch: c.String("scratch-database"), MaxRows: c.Int64("rows"),
		Native: c.Bool("native"), Accepted: accepted})
	if err != nil {
		return fmt.Errorf("answers: %w", err)
	}
	if format == "json" {
		writeJSON(c.App.Writer, rep)
	} else if err := rep.WriteText(c.App.Writer); err != nil {
		return err
	}
	if n := len(rep.Differing()); n > 0 {
		return outcome.Errorf(outcome.GateFailed, "%d statement(s) answer differently on InnoDB (listed above); change them, or accept them with --accept FILE", n)
	}
	return nil
}

// answersCheckOf reads apply's --answers, --answers-accept and --answers-rows; a file that cannot
// be read is a usage error before anything connects.
func answersCheckOf(c *cli.Context) (migration.AnswersCheck, error) {
	a := migration.AnswersCheck{Rows: c.Int64("answers-rows")}
	if a.Rows < 0 {
		return a, outcome.Errorf(outcome.Usage, "--answers-rows must not be negative")
	}
	if a.Rows == 0 {
		a.Rows = -1 // all rows: the check's own zero means its default
	}
	var err error
	switch v := c.String("answers"); v {
	case "auto":
	case "off":
		a.Off = true
	default:
		if a.Statements, err = answers.FromFile(v); err != nil {
			return a, outcome.New(outcome.Usage, fmt.Errorf("--answers: %w", err), "give auto, off, or a file of statements")
		}
	}
	if path := c.String("answers-accept"); path != "" {
		if a.Accepted, err = answers.ReadAccepted(path); err != nil {
			return a, outcome.New(outcome.Usage, fmt.Errorf("--answers-accept: %w", err), "")
		}
	}
	return a, nil
}
