package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
)

// AnswersCheck is how apply checks that the application's reads answer the same on InnoDB
// (package answers) before anything is created.
type AnswersCheck struct {
	// Off skips the check.
	Off bool
	// Statements are the application's statements (from a file or a log); nil: literal examples
	// from performance_schema's statement history, where the server keeps them (the check is
	// skipped, and says so, where it does not).
	Statements []string
	// Accepted are the digests of statements whose new answers the DBA accepted.
	Accepted map[string]bool
	// Rows bounds the rows copied for the check (answers.DefaultRows when 0, all when negative).
	Rows int64
}

// answersGate compares the answers of the application's reads on a MyISAM and an InnoDB copy of
// the table and stops the run (exit 5, nothing created, nothing swapped) when one changes and was
// not accepted. It runs first: the answers do not depend on the shadow, and a run that will be
// stopped has then cost nothing.
func (m *migrator) answersGate(ctx context.Context) error {
	rep, err := checkAnswers(ctx, m.db, m.ti.Schema, m.ti.Name, m.opts.Answers, m.log)
	if rep != nil {
		m.res.Answers = rep
	}
	if err != nil {
		return err
	}
	return answersFailed(differing([]*answers.Report{rep}))
}

// checkAnswers runs the answers check a on schema.table: nil, nil when it is off or the server
// keeps no statement on the table to check (logged).
func checkAnswers(ctx context.Context, db *sql.DB, schema, name string, a AnswersCheck, log *slog.Logger) (*answers.Report, error) {
	if a.Off {
		return nil, nil
	}
	stmts := a.Statements
	if stmts == nil {
		var err error
		stmts, err = answers.FromServer(ctx, db, schema, name)
		if errors.Is(err, answers.ErrNoExamples) || errors.Is(err, workload.ErrDigestsOff) || errors.Is(err, workload.ErrNoStatements) {
			log.Info("answers check skipped: the server keeps no statement on the table to check (give --answers FILE)", "table", schema+"."+name, "reason", err)
			return nil, nil
		}
		if err != nil {
			return nil, outcome.New(outcome.FailedSafe, fmt.Errorf("answers check: %w", err), "nothing was changed; --answers off skips the check")
		}
	}
	rows := a.Rows
	switch {
	case rows == 0:
		rows = answers.DefaultRows
	case rows < 0:
		rows = 0 // answers.Run: every row
	}
	rep, err := answers.Run(ctx, db, schema, name, stmts, answers.Options{MaxRows: rows, Accepted: a.Accepted})
	if err != nil {
		return nil, outcome.New(outcome.FailedSafe, fmt.Errorf("answers check: %w", err), "nothing was changed; --answers off skips the check")
	}
	log.Info("answers check", "table", schema+"."+name, "statements", len(rep.Findings), "differ", len(rep.Differing()))
	return &rep, nil
}

// CheckAnswersOfTables runs the answers check on every table before any is converted (apply
// --plan), so that every statement whose answer changes is named at once, not one table's a
// night. The tables' runs need not check again. It fails like the per-table check (exit 5,
// nothing changed) when a statement's answer changes and was not accepted.
func CheckAnswersOfTables(ctx context.Context, db *sql.DB, tables [][2]string, a AnswersCheck, log *slog.Logger) ([]*answers.Report, error) {
	log = dbconn.Logger(log)
	var reps []*answers.Report
	for _, t := range tables {
		rep, err := checkAnswers(ctx, db, t[0], t[1], a, log)
		if err != nil {
			return reps, fmt.Errorf("%s.%s: %w", t[0], t[1], err)
		}
		if rep != nil {
			reps = append(reps, rep)
		}
	}
	return reps, answersFailed(differing(reps))
}

// tableFinding is a statement whose answer changes, with its table.
type tableFinding struct {
	table string
	answers.Finding
}

func differing(reps []*answers.Report) []tableFinding {
	var out []tableFinding
	for _, r := range reps {
		if r == nil {
			continue
		}
		for _, f := range r.Differing() {
			out = append(out, tableFinding{r.Schema + "." + r.Table, f})
		}
	}
	return out
}

// answersFailed is the check's verdict: nil, or exit 5 naming every statement whose answer
// changes, with why and the remedy.
func answersFailed(differ []tableFinding) error {
	if len(differ) == 0 {
		return nil
	}
	var b strings.Builder
	tables := map[string]bool{}
	for _, f := range differ {
		tables[f.table] = true
		fmt.Fprintf(&b, "\n  %s: %s %s", f.table, f.Digest, f.Statement)
		for _, c := range f.Causes {
			fmt.Fprintf(&b, "\n    why [%s]: %s; remedy: %s", c.Code, c.Says, c.Remedy)
		}
	}
	return outcome.New(outcome.GateFailed,
		fmt.Errorf("answers check failed: %d of the application's statements on %d table(s) answer differently on InnoDB:%s", len(differ), len(tables), b.String()),
		"nothing was changed: change these statements, or accept their new answers by listing their digests in a file given with --answers-accept")
}

// createShadow creates the shadow, and drops at once the FULLTEXT index created only for the
// document id its build after the copy needs (table.ShadowDDL.DropFulltext). FULLTEXT indexes are
// built with MyISAM's stopwords (the words of the table MyISAM ignores, short ones included;
// answers.PrepareStopwords), so that a search for one answers as before: without them InnoDB's
// own, shorter list would apply. Where they cannot be found, InnoDB's own apply, and the log says
// so.
func (m *migrator) createShadow(ctx context.Context) error {
	m.stopwords = m.prepareStopwords(ctx, false)
	if err := answers.CreateWithStopwords(ctx, m.db, m.stopwords, m.ddl.Create); err != nil {
		return err
	}
	if m.ddl.DropFulltext == "" {
		return nil
	}
	if _, err := m.db.ExecContext(ctx, m.ddl.DropFulltext); err != nil {
		return fmt.Errorf("drop the FULLTEXT index until after the copy: %w", err)
	}
	return nil
}

// resumeStopwords finds the stopwords for the FULLTEXT indexes a resumed run still has to build:
// those the interrupted run prepared, which the indexes it built already use.
func (m *migrator) resumeStopwords(ctx context.Context) {
	for _, def := range m.deferred {
		if table.IsFulltext(def) {
			m.stopwords = m.prepareStopwords(ctx, true)
			return
		}
	}
}

// prepareStopwords writes MyISAM's stopwords for the table's FULLTEXT indexes to a table of the
// state schema (no database of its own to need CREATE on), or with reuse takes the one there.
func (m *migrator) prepareStopwords(ctx context.Context, reuse bool) answers.StopwordTable {
	var st answers.StopwordTable
	var err error
	if reuse {
		st, err = answers.FindStopwords(ctx, m.db, m.ti, m.opts.StateSchema)
	}
	if err == nil && st == "" {
		st, err = answers.PrepareStopwords(ctx, m.db, m.ti, m.opts.StateSchema, m.opts.StateSchema)
	}
	switch {
	case err != nil:
		m.log.Warn("the shadow's FULLTEXT indexes use InnoDB's own stopwords: MyISAM's could not be found", "error", err)
		return ""
	case st != "":
		m.log.Info("the shadow's FULLTEXT indexes ignore MyISAM's stopwords", "stopword_table", string(st))
	}
	return st
}
