package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/throttle"
)

// startPace starts the automatic pacing (throttle.Gentle) unless Options.FixedPace; it measures
// the application before the copy begins. The returned function stops it, as the cut-over does
// first (stopPace): the pace has nothing to say there, and its probe would queue on the table
// behind the cut-over's lock, holding a connection of the pool the cut-over works with.
//
// A table that the copy takes in one chunk (a small one, or one with no key and no index to walk)
// is not paced: there are no rests to set and no chunk to shorten, and measuring the application
// first (a second at least while it is busy) was most of the time a whole-database run spent on
// each small table (a wiki's 58 tables: 1.85 s each).
func (m *migrator) startPace(ctx context.Context) (func(), error) {
	if m.opts.FixedPace {
		return func() {}, nil
	}
	if m.budget != nil {
		// Its probe and measurements are about 110 statements a second (400,000 an hour), far
		// past any host's hourly limit: the copy then paces by the fixed rests and the throttle.
		m.log.Info("not pacing by the application: the account's hourly statement limit cannot afford the pace's probes (about 110 statements a second)")
		return func() {}, nil
	}
	if m.ti.Rows <= copier.FirstChunkRows {
		m.log.Info("not pacing: the table is copied in one chunk", "rows", m.ti.Rows)
		return func() {}, nil
	}
	q, err := table.NewSQL(m.ti, table.ShadowName(m.ti.Name))
	if err != nil {
		return nil, err
	}
	if !q.Chunked() {
		m.log.Info("not pacing: the table is copied in one chunk", "rows", m.ti.Rows, "reason", "no unique key and no index to walk")
		return func() {}, nil
	}
	probe := q.Probe()
	g := throttle.NewGentle(m.db, throttle.GentleConfig{Logger: m.log, LatencyFactor: m.opts.LatencyTarget, Probe: func(ctx context.Context) error {
		return drain(ctx, m.db, probe)
	}})
	if err := g.Start(ctx); err != nil {
		return nil, outcome.New(outcome.FailedSafe, fmt.Errorf("pacing: %w", err),
			"check the connection; --fixed-pace runs without measuring the application")
	}
	m.gentle.Store(g)
	var once sync.Once
	m.endPace = func() {
		once.Do(func() {
			m.gentle.Store(nil)
			g.Stop()
			if m.res != nil {
				sum := g.Summary()
				m.res.Pace = &sum
			}
		})
	}
	return m.endPace, nil
}

// stopPace stops the pacing, if it runs.
func (m *migrator) stopPace() {
	if m.endPace != nil {
		m.endPace()
	}
}

// room is the pacing for copier.Pace, nil without it (an interface holding a nil pointer would not
// be nil).
func (m *migrator) room() copier.Room {
	if g := m.gentle.Load(); g != nil {
		return g
	}
	return nil
}

// roomBeside reports whether verification may run beside the index build: always with a fixed
// pace, else while the application leaves room.
func (m *migrator) roomBeside() bool {
	g := m.gentle.Load()
	if g == nil || g.Room() {
		return true
	}
	m.log.Info("verifying after the index build: the application needs the server", "pace", g.State().Level)
	return false
}

// drain runs query and reads every row it returns, whatever its columns: the probe selects every
// column of the copy key, one or several.
func drain(ctx context.Context, db *sql.DB, query string) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	cols, err := rows.Columns()
	if err != nil {
		return errors.Join(err, rows.Close())
	}
	for rows.Next() {
		if _, err := dbconn.ScanValues(rows, len(cols)); err != nil {
			return errors.Join(err, rows.Close())
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}
