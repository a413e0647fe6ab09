// Package answers runs the application's own read statements on a MyISAM and an InnoDB copy of
// the same rows and names each statement whose answer changes with the engine, with the cause
// in words and the remedy. Native ALTER changes the same answers: these are the engines'
// semantics (FULLTEXT's stopwords, token sizes, 50% threshold and ranking; the order of rows a
// statement does not order), which no copy can keep; the check makes them known before the swap.
package answers

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// maxAnswerRows bounds one answer the check reads and compares.
const maxAnswerRows = 100000

// Finding is one statement's verdict.
type Finding struct {
	Statement string `json:"statement"`
	Digest    string `json:"digest"`
	// Differs: the rows (Kind "rows") or only their order (Kind "order") change with the engine.
	Differs    bool    `json:"differs"`
	Kind       string  `json:"kind,omitempty"`
	MyISAMRows int     `json:"myisam_rows"`
	InnoDBRows int     `json:"innodb_rows"`
	Causes     []Cause `json:"causes,omitempty"`
	// Skipped says why the statement was not compared (not a read, not on the table, too large).
	Skipped string `json:"skipped,omitempty"`
	// Accepted: the DBA accepted this statement's new answer (its digest is in the accepted list).
	Accepted bool `json:"accepted,omitempty"`
}

// Report is a check's result.
type Report struct {
	Schema  string `json:"schema"`
	Table   string `json:"table"`
	Rows    int64  `json:"rows_compared"`
	Partial bool   `json:"partial,omitempty"`
	// Native: compared with a plain ALTER's InnoDB table, not apply's (Options.Native).
	Native   bool      `json:"native,omitempty"`
	Findings []Finding `json:"statements"`
}

// Differing are the findings whose answers change and that were not accepted.
func (r Report) Differing() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Differs && !f.Accepted {
			out = append(out, f)
		}
	}
	return out
}

// Check runs each statement (literal SQL naming schema.table, as the application sent it) on both
// copies of the pair and compares the answers: as multisets always, and as ordered lists too,
// since an application reads rows in the order they come (a statement whose ORDER BY decides the
// order gets the same list from the same rows; one without gets the engine's order). accepted
// holds the digests of statements whose new answers the DBA accepted.
func Check(ctx context.Context, db *sql.DB, p *Pair, schema, table string, stmts []string, accepted map[string]bool) (Report, error) {
	rep := Report{Schema: schema, Table: table, Rows: p.Rows, Partial: p.Partial}
	var all []string
	seen := map[string]bool{}
	for _, s := range stmts {
		for _, se := range shapeOf(s).searches {
			for _, w := range se.words() {
				if !seen[w] {
					seen[w] = true
					all = append(all, w)
				}
			}
		}
	}
	ws, err := probeWords(ctx, db, p.Schema, strings.TrimSuffix(p.MyISAM, "_myisam"), all) // names stay under 64 characters
	if err != nil {
		return rep, err
	}
	for _, s := range stmts {
		f, err := checkOne(ctx, db, p, ws, schema, table, s)
		if err != nil {
			return rep, err
		}
		f.Accepted = f.Differs && accepted[f.Digest]
		rep.Findings = append(rep.Findings, f)
	}
	return rep, nil
}

func checkOne(ctx context.Context, db *sql.DB, p *Pair, ws *words, schema, table, stmt string) (Finding, error) {
	f := Finding{Statement: stmt, Digest: Digest(stmt)}
	if k := workload.Kind(stmt); k != "SELECT" {
		f.Skipped = "not a read (" + k + "): only reads are compared"
		return f, nil
	}
	on := func(name string) (string, error) {
		return bench.Template{Name: "statement", SQL: stmt}.Bind(schema, table, p.Schema, name)
	}
	mq, err := on(p.MyISAM)
	if err != nil {
		f.Skipped = err.Error()
		return f, nil
	}
	iq, _ := on(p.InnoDB)
	mine, merr := answer(ctx, db, mq)
	theirs, ierr := answer(ctx, db, iq)
	switch {
	case merr == errTooManyRows || ierr == errTooManyRows:
		f.Skipped = fmt.Sprintf("answers more than %d rows: not compared", maxAnswerRows)
		return f, nil
	case merr != nil && ierr != nil:
		f.Skipped = "fails on both engines: " + merr.Error()
		return f, nil
	case merr != nil || ierr != nil:
		f.Differs, f.Kind = true, "rows"
		f.Causes = []Cause{{Code: CauseOther, Says: fmt.Sprintf("fails on one engine only (MyISAM: %v; InnoDB: %v)", merr, ierr),
			Remedy: "change the statement so that InnoDB runs it"}}
		return f, nil
	}
	f.MyISAMRows, f.InnoDBRows = len(mine), len(theirs)
	a, b := keys(mine), keys(theirs)
	switch {
	case !sameMultiset(a, b):
		f.Differs, f.Kind = true, "rows"
	case !sameList(a, b):
		f.Differs, f.Kind = true, "order"
	default:
		return f, nil
	}
	f.Causes = explain(ctx, db, p, ws, shapeOf(stmt), f.Kind)
	return f, nil
}

// answer runs q and reads its rows.
func answer(ctx context.Context, db *sql.DB, q string) ([][]any, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, maxAnswerRows)
}

// explain names the causes of a difference: the full-text ones first (words the engines treat
// differently, the 50% threshold, ranking), then the order a statement leaves to the engine.
func explain(ctx context.Context, db *sql.DB, p *Pair, ws *words, sh shape, kind string) []Cause {
	var out []Cause
	for _, s := range sh.searches {
		out = append(out, ws.wordCauses(s)...)
		if len(out) == 0 {
			out = append(out, thresholdCause(ctx, db, dbconn.QualifiedName(p.Schema, p.MyISAM), s, p.Rows)...)
		}
	}
	if len(sh.searches) > 0 && len(out) == 0 {
		out = append(out, Cause{Code: CauseRanking,
			Says:   "the engines score full-text relevance differently, so rows ranked by it (or cut by a LIMIT after it) change",
			Remedy: "order by a column of your own after the relevance, or accept the new order"})
	}
	if len(out) > 0 {
		return out
	}
	switch {
	case sh.limit && !sh.orderBy:
		return []Cause{{Code: CauseLimitNoOrder,
			Says:   "LIMIT without ORDER BY: MyISAM returns the first rows of its data file, InnoDB the first in primary-key (or index) order, so other rows come back",
			Remedy: "add an ORDER BY that says which rows the application wants (e.g. ORDER BY the primary key), or accept the new rows"}}
	case !sh.orderBy:
		return []Cause{{Code: CauseOrderNoOrder,
			Says:   "no ORDER BY: the same rows come back in another order (MyISAM's data-file order, InnoDB's key order)",
			Remedy: "add ORDER BY where the application depends on the order, or accept it"}}
	case kind == "order" || sh.limit:
		return []Cause{{Code: CauseOrderTies,
			Says:   "the ORDER BY leaves ties, which each engine returns in its own order" + map[bool]string{true: ", and the LIMIT cuts through them", false: ""}[sh.limit],
			Remedy: "add a unique column (the primary key) at the end of the ORDER BY, or accept it"}}
	}
	return []Cause{{Code: CauseOther, Says: "the answer differs for a reason the check cannot name", Remedy: "compare the two answers by hand: " + strings.TrimSpace(kind)}}
}

// DefaultScratchDB is where the copies live while a check runs.
const DefaultScratchDB = "_enginemig_answers"

// DefaultRows bounds the rows a check copies: answers of larger tables are compared on their first
// rows (in data-file order), and the report says so.
const DefaultRows = 1000000

// Options are a check's settings.
type Options struct {
	// Scratch is the database of the copies (DefaultScratchDB when "").
	Scratch string
	// MaxRows bounds the rows copied (0: every row).
	MaxRows int64
	// Native compares with a plain ALTER TABLE ... ENGINE=InnoDB: the InnoDB copy's FULLTEXT
	// indexes keep InnoDB's own stopwords instead of MyISAM's, which apply gives them.
	Native bool
	// Accepted are the digests of statements whose new answers the DBA accepted.
	Accepted map[string]bool
}

// Run builds the pair, checks the statements on it, and drops it.
func Run(ctx context.Context, db *sql.DB, schema, table string, stmts []string, o Options) (Report, error) {
	if o.Scratch == "" {
		o.Scratch = DefaultScratchDB
	}
	p, err := BuildPair(ctx, db, o.Scratch, schema, table, o.MaxRows, !o.Native)
	if err != nil {
		return Report{}, err
	}
	defer p.Drop(context.WithoutCancel(ctx), db)
	rep, err := Check(ctx, db, p, schema, table, stmts, o.Accepted)
	rep.Native = o.Native
	return rep, err
}
