package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/shadow"
)

// captureCost measures what trigger capture adds to one application write: single-row
// autocommit UPDATEs by primary key on game.state from one client, without and then with the
// capture triggers in place (the number plan.CaptureCostPerWrite quotes).
func captureCost(ctx context.Context, db *sql.DB, rows int) error {
	if err := newGameShape().seed(db, "state", rows); err != nil {
		return err
	}
	const n = 20000
	updates := func() (time.Duration, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			if _, err := db.ExecContext(ctx, "UPDATE state SET coins = coins + 1 WHERE id = ?", 1+(i*7919)%rows); err != nil {
				return 0, err
			}
		}
		return time.Since(start) / n, nil
	}
	plain, err := updates()
	if err != nil {
		return err
	}
	ti, err := table.Load(ctx, db, "game", "state")
	if err != nil {
		return err
	}
	cfg := shadow.Config{DB: db, Source: ti, Target: table.ShadowName("state"), Mode: shadow.Triggers, ChangeLog: table.ChangeLogName("state", false)}
	if err := shadow.Install(ctx, cfg); err != nil {
		return err
	}
	defer shadow.Remove(context.WithoutCancel(ctx), cfg)
	captured, err := updates()
	if err != nil {
		return err
	}
	fmt.Printf("trigger capture cost: UPDATE by primary key %.1f µs without capture triggers, %.1f µs with them: +%.1f µs a write (%d writes each, one client)\n",
		float64(plain.Nanoseconds())/1e3, float64(captured.Nanoseconds())/1e3, float64((captured-plain).Nanoseconds())/1e3, n)
	return nil
}
