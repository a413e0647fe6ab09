// Package carry moves a table's triggers to the table that replaces it in a swap (apply and
// rollback alike), so that every application write fires them exactly once.
package carry

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/pace/lockwait"
)

// Carrier moves a table's triggers to the table that replaces it in a swap (apply and rollback
// alike), so that every application write fires them exactly once and enginemig's own writes fire
// none. Trigger names are unique per schema and cannot be renamed, and RENAME TABLE takes a table's
// triggers with it, so the move has two steps (docs/how-it-works/triggers.md):
//
//  1. install, before the cut-over lock or under it after the catch-up (PrepareSwap says which):
//     guarded stand-ins under temporary names on the table about to become live
//     (table.Trigger.CreateGuarded). They fire only while the real trigger is not on the live
//     table, which before the swap it is.
//  2. finish, after the swap: per trigger, the real one is dropped from the table that left (no
//     longer written by the application) and created on the live table just before its stand-in,
//     which the guard silences at that instant; then the stand-in is dropped.
//
// Each step is one DDL statement and every state between two of them fires each trigger exactly
// once, so a process killed anywhere leaves a correct table; finish, run again, completes it.
type Carrier struct {
	DB       *sql.DB
	Schema   string
	Live     string // the name the application writes
	Triggers []table.Trigger
	Log      *slog.Logger
	// LockWithin bounds each wait of Finish's statements on the live table for a moment no
	// application transaction holds it (lockwait.DefaultTimeout when 0).
	LockWithin time.Duration
	// listing, when set, answers names instead of the server (a test gives a stale answer).
	listing func(ctx context.Context, onTable string) ([]string, error)
	locker  *mdl.Locker // lockLive's, made on first use
}

// Unchanged fails when the live table's triggers differ from those being carried: a trigger
// created or dropped by the application during the migration is DDL on the table. Called under
// the cut-over lock, where no trigger DDL on the table can run.
func (c *Carrier) Unchanged(ctx context.Context) error {
	now, err := table.LoadTriggers(ctx, c.DB, c.Schema, c.Live)
	if err != nil {
		return err
	}
	if !table.SameTriggers(now, c.Triggers) {
		return fmt.Errorf("the triggers of %s changed during the migration (%d at the start, %d now: %s): that is DDL on the table",
			dbconn.QualifiedName(c.Schema, c.Live), len(c.Triggers), len(now), triggerList(now))
	}
	return nil
}

// Install creates the guarded stand-ins on onTable, first removing any left by an earlier attempt.
func (c *Carrier) Install(ctx context.Context, onTable string) error {
	if err := c.DropStandIns(ctx, onTable); err != nil {
		return err
	}
	return c.create(ctx, onTable)
}

// create creates the guarded stand-ins on onTable, in firing order.
func (c *Carrier) create(ctx context.Context, onTable string) error {
	for _, tr := range c.Triggers {
		if err := c.exec(ctx, tr, tr.CreateGuarded(c.Schema, onTable, c.Live)); err != nil {
			return fmt.Errorf("create the stand-in of trigger %s on %s: %w", tr.Name, onTable, err)
		}
	}
	return nil
}

// DropStandIns removes the stand-ins from onTable (a failed attempt's, or a crashed run's).
func (c *Carrier) DropStandIns(ctx context.Context, onTable string) error {
	on, err := c.names(ctx, onTable)
	if err != nil {
		return err
	}
	for _, tr := range c.Triggers {
		if tmp := table.TempTriggerName(c.Schema, c.Live, tr.Name); on[tmp] {
			if err := c.dropStandIn(ctx, tmp); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropStandIn drops a stand-in information_schema listed on the shadow. 1360 counts as done: on
// a Galera node information_schema went on listing a dropped trigger for a second or more
// (finished).
func (c *Carrier) dropStandIn(ctx context.Context, tmp string) error {
	if _, err := c.DB.ExecContext(ctx, table.DropTrigger(c.Schema, tmp)); err != nil && !dbconn.IsNoSuchTrigger(err) {
		return fmt.Errorf("drop stand-in %s: %w", tmp, err)
	}
	return nil
}

// finishTries bounds Finish's passes: information_schema on a Galera node may list a table's
// triggers as they were a moment ago (docs/how-it-works/triggers.md, step 4), and a pass that acts
// on such a listing leaves a step undone, which the next pass, reading again, completes.
const finishTries = 5

// errStop is an error Finish does not retry (a test's simulated crash,
// Faults.CrashAtTrigger).
type errStop struct{ error }

func (e errStop) Unwrap() error { return e.error }

// Finish gives every trigger its real name on the live table (step 2). It is idempotent, and runs
// again until the live table shows every real trigger and no stand-in (finishTries).
func (c *Carrier) Finish(ctx context.Context) error {
	start := time.Now()
	var err error
	for pass := 1; ; pass++ {
		if err = c.finishPass(ctx); err == nil {
			err = c.finished(ctx)
		}
		var stop errStop
		if errors.As(err, &stop) {
			return stop.error
		}
		if err == nil || pass == finishTries {
			break
		}
		c.Log.Info("carrying the triggers: the live table is not as expected yet; reading it again", "pass", pass, "why", err)
		select {
		case <-time.After(time.Duration(pass) * 100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	c.Log.Info("triggers carried to the new table", "triggers", len(c.Triggers), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// finished fails unless the live table holds every carried trigger under its own name and none
// of their stand-ins. A stand-in still listed there is asked for by name first: on a Galera node
// information_schema went on listing a dropped stand-in on the live table for a second or more
// (a second DROP answered 1360); SHOW CREATE TRIGGER finds a trigger by its name as DROP does.
func (c *Carrier) finished(ctx context.Context) error {
	on, err := c.names(ctx, c.Live)
	if err != nil {
		return err
	}
	for _, tr := range c.Triggers {
		if !on[tr.Name] {
			return fmt.Errorf("trigger %s is not on %s", tr.Name, c.Live)
		}
		tmp := table.TempTriggerName(c.Schema, c.Live, tr.Name)
		if !on[tmp] {
			continue
		}
		if there, err := table.TriggerExists(ctx, c.DB, c.Schema, tmp); err != nil {
			return err
		} else if there {
			return fmt.Errorf("stand-in %s of trigger %s is still on %s", tmp, tr.Name, c.Live)
		}
	}
	return nil
}

// finishPass is one pass of Finish over the triggers, in firing order. It decides from the live
// table's listing in information_schema, the view the stand-ins' guards act on: where the listing
// shows the real trigger on the live table, the guard silences the stand-in, and only then is the
// stand-in dropped.
func (c *Carrier) finishPass(ctx context.Context) error {
	on, err := c.names(ctx, c.Live)
	if err != nil {
		return err
	}
	for i, tr := range c.Triggers {
		tmp := table.TempTriggerName(c.Schema, c.Live, tr.Name)
		create := !on[tr.Name]
		if create {
			if err := c.leave(ctx, tr, tmp, on[tmp]); err != nil {
				return err
			}
		}
		if create || on[tmp] {
			if err := c.onLive(ctx, i, tr, tmp, create, on[tmp]); err != nil {
				return err
			}
		}
	}
	return nil
}

// leave drops the real trigger from the table that left (found by name), where the stand-in on
// the live table (standIn) speaks for it; from then on the stand-in's guard lets it fire.
func (c *Carrier) leave(ctx context.Context, tr table.Trigger, tmp string, standIn bool) error {
	real, err := table.TriggerExists(ctx, c.DB, c.Schema, tr.Name)
	if err != nil {
		return err
	}
	if !standIn {
		where := "the server has no trigger of that name: create it again from its definition before the migration"
		if real {
			where = "it is on another table: `SHOW CREATE TRIGGER " + dbconn.QualifiedName(c.Schema, tr.Name) + "` gives its definition"
		}
		return fmt.Errorf("trigger %s: neither it nor its stand-in %s is on %s; recreate it there by hand (%s)", tr.Name, tmp, c.Live, where)
	}
	if real {
		if _, err := c.DB.ExecContext(ctx, table.DropTrigger(c.Schema, tr.Name)); err != nil {
			return fmt.Errorf("drop trigger %s from the table that left: %w", tr.Name, err)
		}
	}
	return nil
}

// onLive does the i-th trigger's steps on the live table, which the application uses, under its
// write lock: the real trigger created just before its stand-in (create), whose guard silences the
// stand-in at that instant, then the stand-in dropped (drop; 1360 counts as done). The lock is
// taken as the cut-over's is (lockLive), never queued behind an application transaction: a queued
// CREATE or DROP TRIGGER makes a transaction that holds the table and asks for more of it fail with
// 1213 (docs/how-it-works/cutover.md, "The cut-over and open transactions"), and one sent with no
// lock wait needs a moment when no session even reads the table, which eight transactional clients
// left for up to a minute. The application waits for the two statements (about 20 ms each) as for a
// cut-over.
func (c *Carrier) onLive(ctx context.Context, i int, tr table.Trigger, tmp string, create, drop bool) error {
	// Where the Locker queues (MySQL), each of its spins waits lock_wait_timeout.
	conn, done, err := c.sessionConn(ctx, tr, "SET SESSION lock_wait_timeout = 2")
	if err != nil {
		return err
	}
	defer done() // also lets go of the lock if a step failed
	if err := c.lockLive(ctx, conn); err != nil {
		return fmt.Errorf("lock %s to carry trigger %s: %w", c.Live, tr.Name, err)
	}
	if create {
		if _, err := conn.ExecContext(ctx, tr.Create(c.Schema, c.Live, tr.Name, tmp)); err != nil {
			return fmt.Errorf("create trigger %s on %s: %w", tr.Name, c.Live, err)
		}
		// A test's crash right after the n-th real trigger (from 1), while its stand-in is still
		// on the live table too.
		if crashAtTrigger(ctx) == i+1 {
			return errStop{ErrSimulatedCrash}
		}
	}
	if drop {
		if _, err := conn.ExecContext(ctx, table.DropTrigger(c.Schema, tmp)); err != nil && !dbconn.IsNoSuchTrigger(err) {
			return fmt.Errorf("drop stand-in %s: %w", tmp, err)
		}
	}
	_, err = conn.ExecContext(ctx, "UNLOCK TABLES")
	return err
}

// lockLive takes the live table's write lock on conn, for up to LockWithin, by the carry's rules
// (mdl.Carry: tried without queuing, and queued only where no application transaction is seen).
func (c *Carrier) lockLive(ctx context.Context, conn *sql.Conn) error {
	if c.locker == nil {
		l, err := mdl.New(ctx, c.DB, dbconn.QualifiedName(c.Schema, c.Live))
		if err != nil {
			return err
		}
		l.Waiting = l.ReportEvery(c.Log, "carrying the triggers", mdl.ReportAfter)
		c.locker = l
	}
	return c.locker.Take(ctx, conn, mdl.Carry(lockwait.TimeoutOr(c.LockWithin)), table.LockWrite(c.Schema, c.Live))
}

// Statements lists what install and finish run, for a dry run's report.
func (c *Carrier) Statements(onTable string) []string {
	var out []string
	for _, tr := range c.Triggers {
		out = append(out, tr.CreateGuarded(c.Schema, onTable, c.Live))
	}
	for _, tr := range c.Triggers {
		tmp := table.TempTriggerName(c.Schema, c.Live, tr.Name)
		out = append(out, table.DropTrigger(c.Schema, tr.Name), table.LockWrite(c.Schema, c.Live),
			tr.Create(c.Schema, c.Live, tr.Name, tmp), table.DropTrigger(c.Schema, tmp), "UNLOCK TABLES")
	}
	return out
}

// names is the set of triggers information_schema lists on onTable.
func (c *Carrier) names(ctx context.Context, onTable string) (map[string]bool, error) {
	var names []string
	var err error
	if c.listing != nil {
		names, err = c.listing(ctx, onTable)
	} else {
		names, err = table.TriggerNames(ctx, c.DB, c.Schema, onTable)
	}
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set, nil
}

// exec runs a CREATE TRIGGER in the original's session context (sessionConn).
func (c *Carrier) exec(ctx context.Context, tr table.Trigger, stmt string) error {
	conn, done, err := c.sessionConn(ctx, tr)
	if err != nil {
		return err
	}
	defer done()
	_, err = conn.ExecContext(ctx, stmt)
	return err
}

// sessionConn is a connection of its own in tr's session context (sql_mode, client character
// set, collation: a CREATE TRIGGER records them with the trigger), with extra settings after it.
// done closes it rather than return it to the pool with those settings.
func (c *Carrier) sessionConn(ctx context.Context, tr table.Trigger, extra ...string) (*sql.Conn, func(), error) {
	conn, err := c.DB.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	done := func() {
		conn.Raw(func(any) error { return driver.ErrBadConn })
		conn.Close()
	}
	for _, q := range append(tr.Session(), extra...) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			done()
			return nil, nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return conn, done, nil
}

// PrepareSwap installs the stand-ins before the lock: a CREATE or DROP TRIGGER takes tens of
// milliseconds, which under the lock the application would wait for, once per trigger; before the
// lock they cost the application nothing, and replay's rows skip their guard
// (dbconn.OwnWriteVar). Not when a trigger writes or reads another table: a stand-in on the target
// makes every write to it open that table too, which the cut-over's LOCK TABLES of the source holds
// (the server locks the tables of the source's triggers with it), so the catch-up's writes would
// wait for the lock they are meant to finish under; those stand-ins are created under the lock
// after the catch-up (UnderLock), and only an earlier attempt's are dropped here. Creating a
// trigger fails for good (its definition, a privilege), not because the table is busy: that stops
// the cut-over instead of retrying.
func (c *Carrier) PrepareSwap(ctx context.Context, onTable string) error {
	if len(c.Triggers) == 0 {
		return nil
	}
	prepare := c.Install
	if c.touchTables() {
		prepare = c.DropStandIns
	}
	if err := prepare(ctx, onTable); err != nil {
		return fmt.Errorf("%w: %w", cutover.ErrAbort, err)
	}
	return nil
}

// UnderLock runs under the cut-over lock once the target has caught up: the triggers must be as
// they were, and the stand-ins PrepareSwap left for now are created.
func (c *Carrier) UnderLock(ctx context.Context, onTable string) error {
	if err := c.CheckUnchanged(ctx); err != nil || !c.touchTables() {
		return err
	}
	if err := c.create(ctx, onTable); err != nil {
		return fmt.Errorf("%w: %w", cutover.ErrAbort, err)
	}
	return nil
}

// touchTables reports whether a trigger's body may read or write a table (PrepareSwap).
func (c *Carrier) touchTables() bool {
	for _, tr := range c.Triggers {
		if tr.TouchesTables() {
			return true
		}
	}
	return false
}

// AbandonSwap removes the stand-ins a failed cut-over attempt installed.
func (c *Carrier) AbandonSwap(ctx context.Context, onTable string) {
	if len(c.Triggers) == 0 {
		return
	}
	if err := c.DropStandIns(ctx, onTable); err != nil {
		c.Log.Warn("could not drop the triggers' stand-ins after a failed cut-over attempt; the next attempt replaces them", "error", err)
	}
}

// CheckUnchanged runs under the lock, where no trigger DDL on the table can run.
func (c *Carrier) CheckUnchanged(ctx context.Context) error {
	if len(c.Triggers) == 0 {
		return nil
	}
	if err := c.Unchanged(ctx); err != nil {
		return fmt.Errorf("%w: %w", cutover.ErrAbort, err)
	}
	return nil
}

// triggerList names trs for a message.
func triggerList(trs []table.Trigger) string {
	names := make([]string, len(trs))
	for i, tr := range trs {
		names[i] = tr.Name
	}
	return orNone(strings.Join(names, ", "))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
