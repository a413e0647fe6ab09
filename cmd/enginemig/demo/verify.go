package demo

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Check is the comparison of the final table with the load's record of acknowledged writes.
type Check struct {
	// Acknowledged is how many UPDATEs and INSERTs the server confirmed.
	Acknowledged int64 `json:"acknowledged_writes"`
	RowsChecked  int64 `json:"rows_checked"`
	// Missing rows were seeded or acknowledged as inserted but are not in the table.
	Missing int64 `json:"missing_rows"`
	// Wrong rows hold another value than the last acknowledged write (or the seed): a lost
	// update, or an old row version resurrected by replay.
	Wrong int64 `json:"wrong_values"`
	// Unexpected rows nobody inserted (an INSERT whose answer was lost may explain Unsure of them).
	Unexpected int64 `json:"unexpected_rows"`
	// Unsure rows had a failed write: the server may or may not have applied it, so they are not judged.
	Unsure int64 `json:"unsure_rows"`
	// MissedUpdates are UPDATEs that found no row while the load ran.
	MissedUpdates int64    `json:"updates_that_found_no_row"`
	Examples      []string `json:"examples,omitempty"`
}

// OK reports whether every acknowledged write is present and nothing else changed.
func (c Check) OK() bool {
	return c.Missing == 0 && c.Wrong == 0 && c.Unexpected <= c.Unsure && c.MissedUpdates == 0
}

// Verify reads every row of the table and compares it with what the application was told. Call it
// after Stop.
func (l *Load) Verify(ctx context.Context, db *sql.DB) (Check, error) {
	var c Check
	T := int64(len(l.workers))
	owner := map[int64]*worker{} // inserted ids
	for _, w := range l.workers {
		c.Acknowledged += w.acked
		c.Unsure += int64(len(w.unsure)) + w.unsureInserts
		c.MissedUpdates += w.missed
		for _, id := range w.mine {
			owner[id] = w
		}
	}
	seen := make([]bool, l.cfg.Rows+1)
	seenIns := map[int64]bool{}
	example := func(format string, args ...any) {
		if len(c.Examples) < 5 {
			c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
		}
	}
	rows, err := db.QueryContext(ctx, "SELECT id, coins FROM "+dbconn.QualifiedName(l.cfg.Schema, l.cfg.Table))
	if err != nil {
		return c, fmt.Errorf("verify: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, coins int64
		if err := rows.Scan(&id, &coins); err != nil {
			return c, fmt.Errorf("verify: %w", err)
		}
		c.RowsChecked++
		var w *worker
		switch {
		case id >= 1 && id <= l.cfg.Rows:
			w = l.workers[(id-1)%T]
			seen[id] = true
		case owner[id] != nil:
			w = owner[id]
			seenIns[id] = true
		default:
			c.Unexpected++
			example("row id %d was never inserted by the application", id)
			continue
		}
		if want, ok := w.expected(id); ok && want != coins {
			c.Wrong++
			example("row id %d has coins=%d, the last acknowledged write set %d", id, coins, want)
		}
	}
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("verify: %w", err)
	}
	for id := int64(1); id <= l.cfg.Rows; id++ {
		if !seen[id] {
			c.Missing++
			example("seeded row id %d is missing", id)
		}
	}
	for id := range owner {
		if !seenIns[id] {
			c.Missing++
			example("row id %d, whose INSERT was acknowledged, is missing", id)
		}
	}
	return c, nil
}
