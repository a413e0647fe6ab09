package binlog

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Applier writes changes to the target table. With a key every operation is idempotent: inserts
// and updates become REPLACE of the whole row by key, deletes delete by key. Applying a change
// twice, or a change to a row the copy has not reached yet, therefore converges to the source's
// state. Where the target has a unique secondary index while changes are replayed (on a Galera
// node), a REPLACE also removes a row holding an out-of-date value of it; shadow/order.go says why
// that row comes back, which needs updates written as REPLACE, never as UPDATE. Without a key
// (table.SQL.Keyless) nothing is idempotent: an insert inserts, a delete or update changes one row
// equal to the old image (LIMIT 1), so each change must be written exactly once, which
// shadow/order.go's rule 5 sees to.
type Applier struct {
	db *sql.DB
	q  *table.SQL
}

// NewApplier writes to q's target. db must use a binary-charset session (internal/db/dbconn/session.go) so
// values replay byte for byte.
func NewApplier(db *sql.DB, q *table.SQL) *Applier {
	return &Applier{db: db, q: q}
}

// Key extracts the key values of a row image.
func (a *Applier) Key(row []any) []any {
	k := make([]any, len(a.q.KeyPositions()))
	for i, p := range a.q.KeyPositions() {
		k[i] = row[p]
	}
	return k
}

type opKind int

const (
	opUpsert opKind = iota
	opDelete
	opDeleteOne // keyless: one row equal to the image
	opUpdateOne // keyless: one row equal to old, to the image
)

var opNames = map[opKind]string{opUpsert: "upsert", opDelete: "delete", opDeleteOne: "delete", opUpdateOne: "update"}

type op struct {
	kind opKind
	row  []any // whole row for upsert, key values for delete, the image otherwise
	old  []any // opUpdateOne: the row before
}

// plan turns changes into primitive operations: an insert an upsert, a delete a delete by key, an
// update an upsert, preceded by a delete of the old key when the key changed. Which changes may be
// left out is not decided here: shadow/order.go hands over only the ones to write.
func (a *Applier) plan(changes []Change) []op {
	if a.q.Keyless() {
		return planKeyless(changes)
	}
	ops := make([]op, 0, len(changes))
	for _, c := range changes {
		switch c.Kind {
		case Insert:
			ops = append(ops, op{kind: opUpsert, row: c.After})
		case Delete:
			ops = append(ops, op{kind: opDelete, row: a.Key(c.Before)})
		case Update:
			kb, ka := a.Key(c.Before), a.Key(c.After)
			if !reflect.DeepEqual(kb, ka) {
				ops = append(ops, op{kind: opDelete, row: kb})
			}
			ops = append(ops, op{kind: opUpsert, row: c.After})
		}
	}
	return ops
}

// planKeyless: an insert is an insert (runs of them share a statement, like upserts), a delete or
// an update touches one row equal to the old image.
func planKeyless(changes []Change) []op {
	ops := make([]op, 0, len(changes))
	for _, c := range changes {
		switch c.Kind {
		case Insert:
			ops = append(ops, op{kind: opUpsert, row: c.After})
		case Delete:
			ops = append(ops, op{kind: opDeleteOne, row: c.Before})
		case Update:
			ops = append(ops, op{kind: opUpdateOne, row: c.After, old: c.Before})
		}
	}
	return ops
}

// maxStatementRows bounds one multi-row statement's placeholders; maxStatementBytes its values,
// which must stay under the server's max_allowed_packet (16 MB by default on MariaDB, 64 MB on
// MySQL): 24 rows of 2 MB made a 48 MB REPLACE after a cut-over attempt held replay, and the
// server dropped the connection. A row larger than maxStatementBytes goes alone (the application
// wrote it, so the server takes it).
const (
	maxStatementRows  = 500
	maxStatementBytes = 4 << 20
)

// size is what o's values weigh in a statement.
func (o op) size() int { return rowBytes(o.row) + rowBytes(o.old) }

// Write writes changes in order in one transaction and returns how many operations ran, and the
// function that commits them (on error it has rolled back); until the commit the written rows stay
// locked in the target. Runs of the same kind are merged into one multi-row statement; order
// between runs is kept, so the result is the same as applying the changes one by one, whatever
// the key's collation.
func (a *Applier) Write(ctx context.Context, changes []Change) (n int, commit func() error, err error) {
	ops := a.plan(changes)
	if len(ops) == 0 {
		return 0, func() error { return nil }, nil
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("replay: begin: %w", err)
	}
	for start := 0; start < len(ops); {
		end := a.runEnd(ops, start)
		if err := a.exec(ctx, tx, ops[start:end]); err != nil {
			tx.Rollback()
			return 0, nil, err
		}
		start = end
	}
	return len(ops), func() error { return commitWithin(ctx, tx) }, nil
}

// commitWithin commits tx as a statement under ctx, then ends database/sql's transaction (a
// second COMMIT, with nothing left to commit). tx.Commit has no context: the driver waits for the
// server's answer however long it takes, and a commit the server held waiting for disk space for
// the binlog kept replay, the stop of the run that waited for it, and so the DROP of the shadow
// that would have freed the space, waiting for good (a CI run of TestDiskFull, 15 minutes). Under
// ctx the driver closes the connection when ctx ends, and dbconn's connection stops the statement
// on the server (KILL QUERY; the server gives a write that waits for space up at its next retry).
func commitWithin(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, "COMMIT"); err != nil {
		tx.Rollback()
		return fmt.Errorf("replay: commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("replay: commit: %w", err)
	}
	return nil
}

// runEnd is where the statement that starts at ops[start] ends: a run of one kind, within
// runLimit's rows and maxStatementBytes (a first row larger than that goes alone).
func (a *Applier) runEnd(ops []op, start int) int {
	end, bytes := start+1, ops[start].size()
	for end < len(ops) && sameRun(ops[start].kind, ops[end].kind) && end-start < a.runLimit(ops[start].kind) {
		if bytes += ops[end].size(); bytes > maxStatementBytes {
			break
		}
		end++
	}
	return end
}

// sameRun: upserts and deletes by key merge with their own kind into one statement; a keyless
// table's one-row deletes and updates stay separate statements (LIMIT 1 each), sent together in
// one round trip (the writer session allows several statements).
func sameRun(first, k opKind) bool {
	if first >= opDeleteOne {
		return k >= opDeleteOne
	}
	return k == first
}

// maxStatementsSent bounds the one-row statements sent together: one round trip per statement is
// too slow for replay (docs/how-it-works/keyless.md, "Rows are addressed by content").
const maxStatementsSent = 100

func (a *Applier) runLimit(k opKind) int {
	if k >= opDeleteOne || k == opUpsert && a.q.OneRowUpserts() {
		return maxStatementsSent
	}
	return maxStatementRows
}

// upserts writes n rows: one REPLACE of them all, or, into a target with a FULLTEXT index, n
// one-row REPLACEs sent together, as a multi-row one that replaces an existing row loses the
// FULLTEXT entries of the rows it wrote before on MySQL (table.SQL.OneRowUpserts).
func (a *Applier) upserts(n int) string {
	if !a.q.OneRowUpserts() {
		return a.q.WriteRows(n, table.Replace)
	}
	one := a.q.WriteRows(1, table.Replace)
	stmts := make([]string, n)
	for i := range stmts {
		stmts[i] = one
	}
	return strings.Join(stmts, ";\n")
}

func (a *Applier) exec(ctx context.Context, tx *sql.Tx, run []op) error {
	var query string
	var args []any
	switch run[0].kind {
	case opUpsert:
		query = a.upserts(len(run))
	case opDelete:
		query = a.q.DeleteKeys(len(run))
	default:
		stmts := make([]string, len(run))
		for i, o := range run {
			if o.kind == opDeleteOne {
				stmts[i] = a.q.DeleteOne()
				args = append(args, o.row...)
			} else {
				stmts[i] = a.q.UpdateOne()
				args = append(append(args, o.row...), o.old...)
			}
		}
		query = strings.Join(stmts, ";\n")
	}
	if run[0].kind <= opDelete {
		for _, o := range run {
			args = append(args, o.row...)
		}
	}
	// Bounded by runLimit and never interrupted: in a rollback the target is MyISAM (dbconn.ExecWhole).
	if _, err := dbconn.ExecWhole(ctx, tx, a.q.Target(), query, args...); err != nil {
		return fmt.Errorf("replay: %d %s(s) into %s: %w", len(run), opNames[run[0].kind], a.q.Target(), err)
	}
	return nil
}
