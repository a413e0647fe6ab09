package migration

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/diskspace"
	"github.com/enginemig/enginemig/pace/throttle"
	"github.com/enginemig/enginemig/plan"
)

// startThrottle is the shared throttle when there is one, else a throttle of this migration's own.
func (m *migrator) startThrottle(ctx context.Context) (*throttle.Throttler, func(), error) {
	if m.opts.Throttle != nil {
		return m.opts.Throttle, func() {}, nil
	}
	return startThrottle(ctx, m.db, m.opts, m.disk.Load(), m.budget)
}

// StartThrottle connects to the replicas and starts the heartbeat and checks, as opts ask
// (MaxThreadsRunning, Replicas, MaxLag; the heartbeat in StateSchema). The returned function
// stops it and closes the replica connections.
func StartThrottle(ctx context.Context, db *sql.DB, opts Options) (*throttle.Throttler, func(), error) {
	return startThrottle(ctx, db, opts, nil, hourlyBudget(opts.Conn, plan.LoadAccount(ctx, db)))
}

// startThrottle is StartThrottle with this run's disk watch and the account's hourly budget (nil:
// none) among its reasons.
func startThrottle(ctx context.Context, db *sql.DB, opts Options, disk *diskspace.Watch, budget *dbconn.HourlyBudget) (*throttle.Throttler, func(), error) {
	schema := opts.StateSchema
	if schema == "" {
		schema = state.DefaultStateSchema
	}
	cfg := throttle.Config{MaxThreadsRunning: opts.MaxThreadsRunning, MaxLag: opts.MaxLag,
		HeartbeatSchema: schema, Logger: dbconn.Logger(opts.Logger), Galera: dbconn.GaleraNode(ctx, db)}
	if disk != nil {
		cfg.Disk = disk
	}
	if budget != nil {
		cfg.Account = budget
	}
	if opts.CopyWindow != nil { // a nil *Schedule in the interface would not be a nil Window
		cfg.Window = opts.CopyWindow
	}
	var pools []*sql.DB
	closeAll := func() {
		for _, p := range pools {
			p.Close()
		}
	}
	for _, rc := range opts.Replicas {
		p, err := dbconn.Open(ctx, rc, "", 2)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("replica %s: %w", rc.Address(), err)
		}
		pools = append(pools, p)
		cfg.Replicas = append(cfg.Replicas, p)
		cfg.ReplicaNames = append(cfg.ReplicaNames, rc.Address())
	}
	thr := throttle.New(db, cfg)
	if err := thr.Start(ctx); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("start throttle: %w", err)
	}
	return thr, func() { thr.Stop(); closeAll() }, nil
}

// hourlyBudget is the account's hourly budget for enginemig (plan.HourlyShare), nil without
// hourly limits. The copy waits for it in the throttle (reason account-hourly), verification and
// trigger capture's syncs in budgetHold.
func hourlyBudget(c dbconn.Config, a plan.AccountLimits) *dbconn.HourlyBudget {
	if share := plan.HourlyShare(a); share > 0 {
		return c.HourlyBudget(share)
	}
	return nil
}

// budgetHold holds verification's chunks while the hourly budget is spent.
type budgetHold struct {
	b   *dbconn.HourlyBudget
	log *slog.Logger
}

func (h budgetHold) Wait(ctx context.Context) error { return h.b.Wait(ctx, h.log) }

func (h budgetHold) Low() (string, bool) { return h.b.Low() }

// copyWaiter is what holds back each chunk: the throttle, and in tests the simulated crash.
func (m *migrator) copyWaiter(ctx context.Context, thr *throttle.Throttler) copier.Waiter {
	var w copier.Waiter = thr
	if d := m.disk.Load(); d != nil && m.opts.Throttle != nil {
		w = diskWaiter{Waiter: thr, w: d}
	}
	w = m.sampling(w)
	if rows := faultsOf(ctx).CrashAfterRows(); rows > 0 {
		return &crashAfter{Waiter: w, m: m, rows: rows}
	}
	return w
}

// crashAfter simulates the process dying once a test's rows are copied (Faults.CrashAfterRows),
// after saving progress as the periodic save would have.
type crashAfter struct {
	copier.Waiter
	m    *migrator
	rows int64
}

func (c *crashAfter) Wait(ctx context.Context) error {
	if c.m.pipe.Progress().RowsCopied >= c.rows {
		c.m.rec.update(ctx, func(*state.State) {})
		return errSimulatedCrash
	}
	return c.Waiter.Wait(ctx)
}
