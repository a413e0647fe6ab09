// Package migration runs the online conversion of one table: one table of stages (stages.go:
// preflight, the gates, copy, indexes, postponed, verify, the dry-run stop, cutover, triggers) on
// top of a shadow.Pipeline, recording each migration in the state table.
package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/diskspace"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/pace/throttle"
	"github.com/enginemig/enginemig/pace/window"
	"github.com/enginemig/enginemig/plan"
	"github.com/enginemig/enginemig/shadow"
	"github.com/enginemig/enginemig/shadow/verify"
)

// DefaultChunkTime is the copy's target duration of one chunk's source read when
// Options.ChunkTime is zero.
const DefaultChunkTime = copier.DefaultChunkTime

// Options configure one migration.
type Options struct {
	Conn       dbconn.Config
	Schema     string
	Table      string
	DryRun     bool
	ChunkTime  time.Duration
	ClientSide bool // see copier.Config.ClientSide
	// KeepKeyless leaves a table without a unique key without a primary key on InnoDB; by
	// default it gets table.RowIDColumn where the server has INVISIBLE columns.
	KeepKeyless bool
	// MaxHold refuses a keyless table whose one-chunk copy would hold the application's writes
	// longer (plan.DefaultMaxHold when 0; plan check keyless-hold).
	MaxHold time.Duration
	// CopyWorkers is how many chunks are copied at once while nobody waits for the table; 0
	// chooses (copyWorkers).
	CopyWorkers int
	// Capture is how changes are captured: plan.CaptureAuto (""), CaptureBinlog or CaptureTriggers.
	Capture     string
	Cutover     cutover.Config
	StateSchema string
	// PostponeFile: while this file exists after the copy, the cut-over waits (replay continues).
	PostponeFile string
	// PostponeUntil releases a postponed cut-over at this time even if the file still exists.
	PostponeUntil time.Time
	// CopyWindow, when set, is when the row copy may run: outside it the copy waits (throttle
	// reason window) while capture keeps the shadow current. CutoverWindow, when set, is when
	// the swap may start: a finished shadow is held (kept current) until it opens, and attempts
	// stop when it closes, to go on at the next opening (windows.go). nil: always.
	CopyWindow, CutoverWindow *window.Schedule
	// ServerID for the binlog connection; random in [1<<30, 1<<31) when zero.
	ServerID uint32
	// Progress is called about every ProgressEvery with a snapshot.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Logger receives notable events; nil discards them.
	Logger *slog.Logger
	// Throttling of the copy (see package throttle): Threads_running limit, replicas whose lag
	// (measured with a heartbeat in StateSchema) must stay under MaxLag.
	MaxThreadsRunning int
	Replicas          []dbconn.Config
	MaxLag            time.Duration
	// FixedPace turns the automatic pacing off (throttle.Gentle: rests, copy workers and
	// verification beside the index build follow the application's own signals): chunks then
	// rest as long as they held the source whenever another client waited for the table.
	FixedPace bool
	// LatencyTarget is the automatic pace's latency target, a factor of the application's p99
	// before the copy (throttle.GentleConfig.LatencyFactor): 0 takes the default, negative turns
	// it off.
	LatencyTarget float64
	// ControlSocket, when set, is a unix socket for live control (see package control).
	ControlSocket string
	// MetricsListen, when set, is a host:port serving Prometheus metrics at /metrics
	// (control.ServeMetrics); MetricsAddr, when set, receives the address it listens on.
	MetricsListen string
	MetricsAddr   func(addr string)
	// Board, when set, gets this migration's status for a metrics endpoint the caller serves
	// over several migrations (apply --plan --parallel); MetricsListen is then left empty.
	Board *control.Board
	// Throttle, when set, is a started throttle shared with other migrations (apply --plan
	// --parallel): the copy waits on it and the caller stops it. Otherwise each migration starts
	// its own from MaxThreadsRunning, Replicas and MaxLag.
	Throttle *throttle.Throttler
	// Catalog, when set, is a whole run's server-wide lookups for the preflight's checks (MERGE
	// tables, foreign keys), read once for all its tables (apply --plan); nil: read for this table.
	Catalog *plan.Catalog
	// Alongside is how many tables a whole-plan run converts at once, this one among them (apply
	// --plan --parallel; 0 or 1: one): they share the pool and each opens its own pipeline, which
	// the account's connection cap must hold (plan's account-limits check).
	Alongside int
	// LockTimeout bounds how long one statement of the migration may wait for a lock another
	// session holds before the migration stops with nothing changed (lockwait.DefaultTimeout when 0).
	LockTimeout time.Duration
	// ReconnectFor is how long a lost connection is retried, with backoff, before the run stops
	// with its work kept for a re-run (exit 7): DefaultReconnectFor when 0, never when negative.
	ReconnectFor time.Duration
	// DiskReserve is the free space kept on the server's file systems (datadir, binlog, tmpdir):
	// under it the copy and the index build wait (diskspace.Watch). nil: diskspace.DefaultReserve;
	// a zero Reserve never waits, though a full disk is still recognised.
	DiskReserve *diskspace.Reserve
	// DiskPauseLimit ends a run that stayed under the reserve this long (diskspace.DefaultPauseLimit
	// when 0); DiskKeep then keeps the shadow for a resume (exit 7) instead of dropping it (exit 6),
	// and likewise when the disk fills.
	DiskPauseLimit time.Duration
	DiskKeep       bool
	// SkipVerify skips the chunk-by-chunk comparison of source and shadow before the cut-over.
	SkipVerify bool
	// Gates to run (see ParseGates) and how they benchmark.
	Gates      map[Point]bool
	GateConfig bench.GateConfig
	// Answers: the check that the application's reads answer the same on InnoDB.
	Answers AnswersCheck
	// Hook runs at HookPoints (nil: none). An error at start or a before-* point stops the migration.
	Hook func(ctx context.Context, at Point, st *state.State) error
}

// Progress is a snapshot for progress displays.
type Progress struct {
	Stage             state.Stage   `json:"stage"`
	RowsCopied        int64         `json:"rows_copied"`
	RowsTotal         int64         `json:"rows_total"`
	ChunkSize         int64         `json:"chunk_size"`
	CaptureChanges    int64         `json:"capture_changes"`
	CaptureCatchingUp bool          `json:"capture_catching_up"`
	Elapsed           time.Duration `json:"elapsed_ns"`
	// The current stage's own progress: rows copied during copy, rows compared during verify
	// (0 for the other stages). Done never exceeds Total (TABLE_ROWS is an estimate the copy can
	// pass); the rate and ETA are the stage's own. While the rate is 0 (the stage's first
	// report), the ETAs are 0 too and mean unknown.
	StageDone  int64         `json:"stage_done"`
	StageTotal int64         `json:"stage_total"`
	StageRate  float64       `json:"stage_rate"`
	StageETA   time.Duration `json:"stage_eta_ns"`
	// RunETA is what is left of copy and verify together (see stageClock.runETA).
	RunETA time.Duration `json:"run_eta_ns"`
	// Waiting says what the migration waits on, if anything (the longest wait first).
	Waiting string `json:"waiting,omitempty"`
}

// Result summarises a finished migration.
type Result struct {
	Schema         string             `json:"schema"`
	Table          string             `json:"table"`
	DryRun         bool               `json:"dry_run"`
	ID             int64              `json:"migration_id"`
	RowsCopied     int64              `json:"rows_copied"`
	CaptureChanges int64              `json:"capture_changes"`
	CopyTime       time.Duration      `json:"copy_ns"`
	CopyLockTime   time.Duration      `json:"copy_source_read_ns"`
	CopyWorkers    int                `json:"copy_workers"` // at most this many chunks at once (copyWorkers)
	IndexTime      time.Duration      `json:"index_build_ns"`
	TotalTime      time.Duration      `json:"total_ns"`
	Cutover        *cutover.Result    `json:"cutover,omitempty"`
	OldTable       string             `json:"old_table,omitempty"`
	DeferredIndex  int                `json:"deferred_indexes"`
	ShadowChanges  []string           `json:"shadow_changes,omitempty"`
	Gates          []bench.GateResult `json:"gates,omitempty"`
	Verify         *verify.Result     `json:"verify,omitempty"`
	Answers        *answers.Report    `json:"answers,omitempty"`
	// Triggers: the statements that carry the table's triggers across the swap (a dry run lists
	// what it would run), or the names of the triggers carried.
	Triggers []string `json:"triggers,omitempty"`
	// Pace is the automatic pace's latency figures over the run (absent with FixedPace, and for a
	// table copied in one chunk, which is not paced).
	Pace *throttle.LatencySummary `json:"pace,omitempty"`
	// Estimate is plan's copy estimate beside the actual copy and index build (not for a
	// resumed run, whose copy started earlier).
	Estimate *EstimateCheck `json:"estimate,omitempty"`
}

// Run migrates one table. Errors carry an outcome code: Refused before anything was created,
// FailedSafe when the migration stopped and the original table is in place, NeedsAttention
// otherwise.
func Run(ctx context.Context, db *sql.DB, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	opts.StateSchema = state.Resolve(ctx, db, opts.StateSchema, opts.Schema, true)
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	ctl := newController(opts.Logger, abort)
	watch := watchConfig(db, opts, abort)
	watch.Enforce = ctl.beforeSwap
	watch.Disk = ctl.diskShort
	ctl.waits = lockwait.NewWatcher(watch)
	opts.Cutover.Observer = cutoverObserver{ctl}
	defer ctl.waits.Start(ctx, ctl.watchThrottle)()
	closeControl, err := listenControl(ctx, opts, ctl)
	if err != nil {
		return nil, outcome.New(outcome.Usage, err, "choose another --control-socket path")
	}
	defer closeControl()
	if opts.MetricsListen != "" {
		metrics, err := control.ServeMetrics(opts.MetricsListen, ctl.Status)
		if err != nil {
			return nil, outcome.New(outcome.Usage, err, "choose another --metrics-listen address")
		}
		defer metrics.Close()
		opts.Logger.Info("metrics served", "url", "http://"+metrics.Addr()+"/metrics")
		if opts.MetricsAddr != nil {
			opts.MetricsAddr(metrics.Addr())
		}
	}
	if opts.Board != nil {
		defer opts.Board.Add(ctl.Status)()
	}
	start := time.Now()
	attempt := func() (*Result, error) {
		m := &migrator{db: db, opts: opts, log: opts.Logger, start: start, ctl: ctl}
		ctl.attach(m)
		defer ctl.attach(nil)
		return m.run(ctx)
	}
	res, err := attempt()
	defer func() { res.settleEstimate() }()
	// A lost connection (server restart, network) leaves the shadow and the progress in place:
	// reconnect with backoff and resume, then give up with a clear message.
	var lost error
	var lostAt time.Time
	for n := 1; err != nil && ctx.Err() == nil && (errors.Is(err, errSuspended) || dbconn.IsConnectionLoss(err)); n++ {
		if lost == nil {
			lost, lostAt = err, time.Now()
		}
		left := opts.ReconnectFor - time.Since(lostAt)
		if left <= 0 {
			break
		}
		wait := min(time.Second<<(n-1), 30*time.Second, left)
		opts.Logger.Warn("lost the connection to the server; resuming", "error", err, "in", wait, "attempt", n, "gives_up_after", opts.ReconnectFor)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		res, err = attempt()
	}
	// A server that stayed away fails the last retry before it resumes anything (in preflight,
	// say), which says nothing about the table: report the loss that stopped the work, with its
	// remedy (exit 7, run the same apply again), not the retry's own error.
	if errors.Is(lost, errSuspended) && err != nil && !errors.Is(err, errSuspended) && dbconn.IsConnectionLoss(err) {
		err = lost
	}
	if lt := ctl.waits.TimeoutErr(); err != nil && lt != nil {
		err = lt
	} else if rs := replicaStopped(ctx, err); err != nil && rs != nil {
		err = rs
	} else if err != nil && errors.Is(context.Cause(ctx), errAborted) {
		err = outcome.New(outcome.FailedSafe, fmt.Errorf("%w; the shadow was dropped and the original table is unchanged", errAborted), "")
	}
	return res, err
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = dbconn.Logger(nil)
	}
	if o.ChunkTime == 0 {
		o.ChunkTime = copier.DefaultChunkTime
	}
	if o.Cutover.LockWait == 0 { // not configured
		logger := o.Cutover.Logger
		o.Cutover = cutover.DefaultConfig()
		o.Cutover.Logger = logger
	}
	if o.Cutover.Logger == nil {
		o.Cutover.Logger = o.Logger
	}
	if o.ReconnectFor == 0 {
		o.ReconnectFor = DefaultReconnectFor
	}
	if o.DiskReserve == nil {
		r := diskspace.DefaultReserve
		o.DiskReserve = &r
	}
	if o.DiskPauseLimit == 0 {
		o.DiskPauseLimit = diskspace.DefaultPauseLimit
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 500 * time.Millisecond
	}
	if o.ServerID == 0 {
		o.ServerID = 1<<30 + rand.Uint32N(1<<30)
	}
	return o
}

// DefaultReconnectFor is how long apply keeps resuming after a lost connection when
// Options.ReconnectFor is 0: long enough for a server restart or a failover of its address, short
// enough that a server that stays away is reported while someone is still watching.
const DefaultReconnectFor = time.Minute

// errSuspended marks a run stopped by a lost connection with its work kept for resuming.
var errSuspended = errors.New("connection lost")

// migrator is one attempt at a migration (a resume after a lost connection is a new one).
type migrator struct {
	db      *sql.DB
	budget  *dbconn.HourlyBudget // the account's hourly statements (nil: no hourly limit)
	version string               // VERSION() of the server, for the binlog flavor
	capture shadow.Mode
	opts    Options
	log     *slog.Logger
	start   time.Time
	ctl     *controller

	ti       *table.Info
	ddl      table.ShadowDDL
	deferred []string // index definitions still to build
	// stopwords are MyISAM's stopwords for the shadow's FULLTEXT indexes ("": InnoDB's own).
	stopwords answers.StopwordTable
	// galeraMaxChunk caps a copy chunk's rows on a Galera node (its write-set limits); 0: none.
	galeraMaxChunk int
	resume         *state.State // the interrupted run being resumed, if any
	settledDone    *Result      // the interrupted run had completed its swap: preflight finished it
	closers        []func()     // what the stages opened, closed when the run ends (onExit)
	triggers       []table.Trigger
	probe          *bench.Result // the after-cutover gate's baseline, taken before the swap
	rec            *recorder
	pipe           *shadow.Pipeline
	gentle         atomic.Pointer[throttle.Gentle] // the pacing while it runs; nil with FixedPace
	endPace        func()                          // stops the pacing (once); nil before it starts
	disk           atomic.Pointer[diskspace.Watch] // the free-space watch; nil when space cannot be read
	verifyCost     atomic.Pointer[verifyCost]      // verification's sampled cost (sample.go); nil before the sample
	// rec and pipe as the controller's goroutines (control, status, metrics, the waits watcher)
	// read them: published once the run has them (liveRecord, livePipeline).
	recLive  atomic.Pointer[recorder]
	pipeLive atomic.Pointer[shadow.Pipeline]
	res      *Result
}

// liveRecord is the run's record for other goroutines (nil before the run has one).
func (m *migrator) liveRecord() *recorder { return m.recLive.Load() }

// livePipeline is the run's pipeline for other goroutines (nil before the run has one).
func (m *migrator) livePipeline() *shadow.Pipeline { return m.pipeLive.Load() }

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
