// Package cleanup removes what an interrupted or finished migration left beside its table.
package cleanup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/preflight"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/shadow"
)

// Options say which table's leftovers to remove.
type Options struct {
	Conn        dbconn.Config
	Schema      string
	Table       string
	StateSchema string
	// DropOld also drops the kept original `_t_old`, which ends the possibility of a rollback.
	DropOld bool
}

// Result lists what was dropped.
type Result struct {
	Dropped []string `json:"dropped"`
	Kept    []string `json:"kept,omitempty"`
}

// Run removes what an interrupted or finished migration left: the shadow `_t_new` (also the
// InnoDB copy a rollback keeps), a cut-over sentry, and with DropOld the kept original. It refuses
// while a migration of the table runs, and marks interrupted records as cleaned up.
func Run(ctx context.Context, db *sql.DB, opts Options) (*Result, error) {
	if _, err := preflight.LoadTable(ctx, db, opts.Schema, opts.Table); err != nil {
		return nil, err
	}
	lock, err := state.Lock(ctx, opts.Conn, opts.Schema, opts.Table)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	res := &Result{}
	drop := func(name string) error {
		if _, err := db.ExecContext(ctx, table.DropTable(opts.Schema, name)); err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
		res.Dropped = append(res.Dropped, name)
		return nil
	}
	exists := func(name string) bool {
		_, err := table.Load(ctx, db, opts.Schema, name)
		return err == nil || !errors.Is(err, table.ErrNotFound)
	}
	// Capture triggers first: one left without its change log would fail the application's writes.
	dropped, err := shadow.RemoveLeftovers(ctx, db, opts.Schema, opts.Table)
	res.Dropped = append(res.Dropped, dropped...)
	if err != nil {
		return res, err
	}
	if swap := table.SwapName(opts.Table); exists(swap) {
		if !cutover.IsSentry(ctx, db, opts.Schema, swap) {
			return nil, preflight.Refuse("it holds data: a cut-over was interrupted right after the swap; rename it to "+table.OldName(opts.Table)+" by hand",
				"%s is not an enginemig sentry", dbconn.QualifiedName(opts.Schema, swap))
		}
		if err := drop(swap); err != nil {
			return nil, err
		}
	}
	gates, err := cutover.DropLeftGates(ctx, db, opts.Schema, table.GateName(opts.Table), table.GoneName(opts.Table))
	if res.Dropped = append(res.Dropped, gates...); err != nil {
		return res, err
	}
	if sh := table.ShadowName(opts.Table); exists(sh) {
		if err := drop(sh); err != nil {
			return nil, err
		}
	}
	if old := table.OldName(opts.Table); exists(old) {
		if opts.DropOld {
			if err := drop(old); err != nil {
				return nil, err
			}
		} else {
			res.Kept = append(res.Kept, old+" (the original kept for rollback; --drop-old removes it)")
		}
	}
	store := state.NewStore(db, state.Resolve(ctx, db, opts.StateSchema, opts.Schema, false))
	if states, err := store.List(ctx, opts.Schema, opts.Table); err == nil {
		for i := range states {
			if states[i].Stage.InProgress() && states[i].FinishedAt == nil {
				now := time.Now().UTC()
				states[i].Stage, states[i].FinishedAt, states[i].Error = state.StageFailed, &now, "interrupted; cleaned up"
				store.Save(ctx, &states[i])
			}
		}
	}
	return res, nil
}
