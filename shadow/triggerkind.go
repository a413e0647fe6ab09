package shadow

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
)

// triggerKind: set-up is the change log and three triggers on the source, installed before the
// first row is copied; they stay when the capture closes, noting changes for a resumed run, so a
// restart needs no position; tear-down drops the triggers, then the log.
type triggerKind struct{}

// DefaultLockWithin is how long trigger capture's set-up tries for a moment the source is free
// when its caller sets no bound (Config.LockWithin).
const DefaultLockWithin = 30 * time.Second

func (k triggerKind) open(ctx context.Context, p *Pipeline) (Capture, error) {
	cfg := p.cfg
	if err := k.install(ctx, cfg); err != nil {
		return nil, err
	}
	var version string
	if err := cfg.DB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, err
	}
	locker, err := mdl.New(ctx, cfg.DB, cfg.Source.Name, p.q.Target())
	if err != nil {
		return nil, err
	}
	every := 200 * time.Millisecond
	if d := faultsOf(ctx).SyncEvery(); d > 0 {
		every = d
	}
	return &triggerCapture{c: p.q.Capture(cfg.Source, cfg.ChangeLog), q: p.q, db: cfg.DB, writer: p.writer, order: &p.order,
		every: every, hold: cfg.Hold, log: cfg.Logger, handedOut: dbconn.MariaDB(version), galera: cfg.Galera,
		locker: locker}, nil
}

func (triggerKind) install(ctx context.Context, cfg Config) error {
	q, err := table.NewSQL(cfg.Source, cfg.Target)
	if err != nil {
		return err
	}
	return installTriggers(ctx, cfg, q.Capture(cfg.Source, cfg.ChangeLog))
}

func (triggerKind) setupRemedy() string { return "the user needs the TRIGGER privilege on the table" }

func (triggerKind) needsStart() bool { return false }

// resumable: the triggers kept noting changes while no enginemig ran; if they are gone (removed
// by hand), the resumed run installs them again and its verification recopies what they missed.
func (triggerKind) resumable(context.Context, *sql.DB, Position) (string, string, error) {
	return "", "", nil
}

func (triggerKind) remove(ctx context.Context, cfg Config) error {
	q, err := table.NewSQL(cfg.Source, cfg.Target)
	if err != nil {
		return err
	}
	return removeTriggers(ctx, cfg.DB, q.Capture(cfg.Source, cfg.ChangeLog))
}

func (triggerKind) now(context.Context, *sql.DB) (Position, error) { return "", nil }
func (triggerKind) behind(Position, Position) (int64, string)      { return 0, "" }

// installTriggers creates the change log and whichever capture triggers are missing (a resumed
// run finds them still capturing). Creating a trigger takes the source's metadata lock, by the
// rules of mdl.TriggerDDL (never queued on MariaDB, tried patiently), all of them within
// cfg.LockWithin; the wait is logged as it lasts.
func installTriggers(ctx context.Context, cfg Config, c *table.CaptureSQL) error {
	db := cfg.DB
	if _, err := db.ExecContext(ctx, c.CreateLog()); err != nil {
		return fmt.Errorf("create change log %s: %w", c.Log(), err)
	}
	_, name := c.Source()
	locker, err := mdl.New(ctx, db, name)
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer conn.Raw(func(any) error { return driver.ErrBadConn }) // keep the short lock wait out of the pool
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 2"); err != nil {
		return err
	}
	within := cfg.LockWithin
	if within <= 0 {
		within = DefaultLockWithin
	}
	began := time.Now()
	var trigger string // the one being created
	locker.Waiting = func(time.Duration) {
		if cfg.Logger != nil {
			cfg.Logger.Info("capture triggers: waiting for a moment the table is free of the application's statements", "table", trigger, "waited", time.Since(began).Round(time.Second), "gives_up_after", within)
		}
	}
	for i, stmt := range c.CreateTriggers() {
		trigger = c.TriggerNames()[i]
		there, err := table.TriggerExists(ctx, conn, c.Schema(), trigger)
		if err != nil {
			return err
		}
		if there {
			continue
		}
		if err := locker.Take(ctx, conn, mdl.TriggerDDL(within-time.Since(began)), stmt); err != nil {
			return fmt.Errorf("create capture trigger %s: %w", trigger, err)
		}
	}
	return nil
}

// removeTriggers drops the capture triggers, then the change log: in that order, so no
// application write ever fires a trigger whose log is gone. The triggers move with their table
// when it is renamed, and are found by name. Only what is there is dropped: a DROP ... IF EXISTS
// of nothing is still written to the binlog, and on a full disk it waits for binlog space with
// nothing to free it (a binlog-captured run stopped for a full disk hung so, before the shadow's
// DROP that gives the space back).
func removeTriggers(ctx context.Context, db *sql.DB, c *table.CaptureSQL) error {
	for i, stmt := range c.DropTriggers() {
		there, err := table.TriggerExists(ctx, db, c.Schema(), c.TriggerNames()[i])
		if err != nil {
			return fmt.Errorf("find capture trigger: %w", err)
		}
		if !there {
			continue
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("drop capture trigger: %w", err)
		}
	}
	there, err := table.Exists(ctx, db, c.Schema(), c.LogName())
	if err != nil || !there {
		return err
	}
	if _, err := db.ExecContext(ctx, c.DropLog()); err != nil {
		return fmt.Errorf("drop change log %s: %w", c.Log(), err)
	}
	return nil
}

// leftovers removes every capture trigger on the table and its working tables, then the change
// logs of both directions.
func (triggerKind) leftovers(ctx context.Context, db *sql.DB, schema, name string) ([]string, error) {
	names, err := captureTriggersOn(ctx, db, schema, name)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, n := range names {
		if _, err := db.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+dbconn.QualifiedName(schema, n)); err != nil {
			return dropped, fmt.Errorf("drop capture trigger %s: %w", n, err)
		}
		dropped = append(dropped, n)
	}
	for _, back := range []bool{false, true} {
		log := table.ChangeLogName(name, back)
		there, err := table.Exists(ctx, db, schema, log)
		if err != nil {
			return dropped, err
		}
		if !there {
			continue
		}
		if _, err := db.ExecContext(ctx, "DROP TABLE "+dbconn.QualifiedName(schema, log)); err != nil {
			return dropped, fmt.Errorf("drop change log %s: %w", log, err)
		}
		dropped = append(dropped, log)
	}
	return dropped, nil
}

// captureTriggersOn names the capture triggers on the table, its shadow and its kept original.
func captureTriggersOn(ctx context.Context, db *sql.DB, schema, name string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?
		AND EVENT_OBJECT_TABLE IN (?, ?, ?)`, schema, name, table.ShadowName(name), table.OldName(name))
	if err != nil {
		return nil, fmt.Errorf("find capture triggers: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if table.IsCaptureTrigger(n) {
			names = append(names, n)
		}
	}
	return names, rows.Err()
}
