// Package migration sequences the online conversion of one table (preflight, shadow, capture,
// copy, replay, indexes, cut-over) and records each migration in the state table.
package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/outcome"
	"github.com/enginemig/enginemig/table"
	"github.com/enginemig/enginemig/throttle"
	"github.com/enginemig/enginemig/verify"
)

// Options configure one migration.
type Options struct {
	Conn        dbconn.Config
	Schema      string
	Table       string
	DryRun      bool
	ChunkTime   time.Duration
	ClientSide  bool // see copier.Config.ClientSide
	Cutover     cutover.Config
	StateSchema string
	// PostponeFile: while this file exists after the copy, the cut-over waits (replay continues).
	PostponeFile string
	// PostponeUntil releases a postponed cut-over at this time even if the file still exists.
	PostponeUntil time.Time
	// ServerID for the binlog connection; random in [1<<30, 1<<31) when zero.
	ServerID uint32
	// Progress is called about every ProgressEvery with a snapshot; Log with notable events.
	Progress      func(Progress)
	ProgressEvery time.Duration
	Log           func(format string, args ...any)
	// Throttling of the copy (see package throttle): Threads_running limit, replicas whose lag
	// (measured with a heartbeat in StateSchema) must stay under MaxLag.
	MaxThreadsRunning int
	Replicas          []dbconn.Config
	MaxLag            time.Duration
	// ControlSocket, when set, is a unix socket for live control (see package control).
	ControlSocket string
	// SkipVerify skips the chunk-by-chunk comparison of source and shadow before the cut-over.
	SkipVerify bool
	// Gates to run (see ParseGates) and how they benchmark.
	Gates      map[string]bool
	GateConfig bench.GateConfig
	// Hooks run at stage boundaries (nil: none). An error from a before-* hook stops the migration.
	Hook func(ctx context.Context, stage string, st *State) error

	// Test seams: simulate the process dying (no cleanup) after this many copied rows or on
	// entering a stage; save progress this often (default 2 s).
	crashAfterRows int64
	crashAtStage   string
	saveEvery      time.Duration
	idleChunkTime  time.Duration // copier.Config.IdleChunkTime, to keep a test's copy slow
	replayDelay    time.Duration // binlog.Replayer.ApplyDelay, to keep replay behind
}

// Progress is a snapshot for progress displays.
type Progress struct {
	Stage        string        `json:"stage"`
	RowsCopied   int64         `json:"rows_copied"`
	RowsTotal    int64         `json:"rows_total"`
	ChunkSize    int64         `json:"chunk_size"`
	ReplayEvents int64         `json:"replay_events"`
	CatchingUp   bool          `json:"replay_catching_up"`
	Elapsed      time.Duration `json:"elapsed_ns"`
}

// Result summarises a finished migration.
type Result struct {
	Schema        string             `json:"schema"`
	Table         string             `json:"table"`
	DryRun        bool               `json:"dry_run"`
	ID            int64              `json:"migration_id"`
	RowsCopied    int64              `json:"rows_copied"`
	ReplayEvents  int64              `json:"replay_events"`
	CopyTime      time.Duration      `json:"copy_ns"`
	CopyLockTime  time.Duration      `json:"copy_source_read_ns"`
	IndexTime     time.Duration      `json:"index_build_ns"`
	TotalTime     time.Duration      `json:"total_ns"`
	Cutover       *cutover.Result    `json:"cutover,omitempty"`
	OldTable      string             `json:"old_table,omitempty"`
	DeferredIndex int                `json:"deferred_indexes"`
	ShadowChanges []string           `json:"shadow_changes,omitempty"`
	Gates         []bench.GateResult `json:"gates,omitempty"`
	Verify        *verify.Result     `json:"verify,omitempty"`
}

// Run migrates one table. Errors carry an outcome code: Refused before anything was created,
// FailedSafe when the migration stopped and the original table is in place, NeedsAttention
// otherwise.
func Run(ctx context.Context, db *sql.DB, opts Options) (*Result, error) {
	m := &migrator{db: db, opts: opts, start: time.Now()}
	if m.opts.Log == nil {
		m.opts.Log = func(string, ...any) {}
	}
	if m.opts.ChunkTime == 0 {
		m.opts.ChunkTime = copier.DefaultChunkTime
	}
	if m.opts.Cutover.Attempts == 0 {
		m.opts.Cutover = cutover.DefaultConfig()
	}
	if m.opts.Cutover.Log == nil {
		m.opts.Cutover.Log = m.opts.Log
	}
	if m.opts.ProgressEvery == 0 {
		m.opts.ProgressEvery = 500 * time.Millisecond
	}
	if m.opts.saveEvery == 0 {
		m.opts.saveEvery = 2 * time.Second
	}
	if m.opts.ServerID == 0 {
		m.opts.ServerID = 1<<30 + rand.Uint32N(1<<30)
	}
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	m.ctl = newController(m, abort)
	closeControl, err := m.listenControl(ctx, m.ctl)
	if err != nil {
		return nil, outcome.New(outcome.Usage, err, "choose another --control-socket path")
	}
	defer closeControl()
	res, err := m.run(ctx)
	// A lost connection (server restart, network) leaves the shadow and the progress in place:
	// reconnect with backoff and resume, then give up with a clear message.
	for attempt := 1; err != nil && ctx.Err() == nil && attempt <= maxReconnects &&
		(errors.Is(err, errSuspended) || isConnectionLoss(err)); attempt++ {
		wait := min(time.Second<<(attempt-1), 30*time.Second)
		m.opts.Log("lost the connection to the server (%v); resuming in %s (attempt %d of %d)", err, wait, attempt, maxReconnects)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		m.reset()
		res, err = m.run(ctx)
	}
	if err != nil && errors.Is(context.Cause(ctx), errAborted) {
		err = outcome.New(outcome.FailedSafe, fmt.Errorf("%w; the shadow was dropped and the original table is unchanged", errAborted), "")
	}
	return res, err
}

// maxReconnects bounds automatic resumes after lost connections (backoff 1 s doubling, ~1 min).
const maxReconnects = 6

// errSuspended marks a run stopped by a lost connection with its work kept for resuming.
var errSuspended = errors.New("connection lost")

// reset clears what one run built, before the next attempt resumes.
func (m *migrator) reset() {
	m.stageMu.Lock()
	defer m.stageMu.Unlock()
	m.ti, m.state, m.store, m.reader, m.writer, m.stream, m.replay, m.copy, m.thr, m.stage = nil, State{}, nil, nil, nil, nil, nil, nil, nil, ""
}

type migrator struct {
	db      *sql.DB
	version string // VERSION() of the server, for the binlog flavor
	opts    Options
	start   time.Time
	ti      *table.Info
	state   State
	store   *Store
	reader  *sql.DB
	writer  *sql.DB
	stream  *binlog.Stream
	replay  *binlog.Replayer
	copy    *copier.Copier
	thr     *throttle.Throttler
	ctl     *controller
	stage   string
	stageMu sync.Mutex
}

func (m *migrator) run(ctx context.Context) (*Result, error) {
	version, err := checkServer(ctx, m.db)
	if err != nil {
		return nil, err
	}
	m.version = version
	ti, err := loadTable(ctx, m.db, m.opts.Schema, m.opts.Table)
	if err != nil {
		return nil, err
	}
	lock, err := lockTable(ctx, m.opts.Conn, ti.Schema, ti.Name)
	if err != nil {
		return nil, err
	}
	defer lock.Close()

	// An earlier run that died leaves its record in progress: resume it, or settle it first.
	m.store = NewStore(m.db, m.opts.StateSchema)
	var resume *State
	if prev, err := m.unfinished(ctx); err != nil {
		return nil, err
	} else if prev != nil {
		var done bool
		resume, done, err = m.settleInterrupted(ctx, prev)
		if err != nil {
			return nil, outcome.New(outcome.NeedsAttention, fmt.Errorf("settle interrupted migration #%d: %w", prev.ID, err), "")
		}
		if done {
			return &Result{Schema: ti.Schema, Table: ti.Name, ID: prev.ID, OldTable: table.OldName(ti.Name)}, nil
		}
		if ti, err = loadTable(ctx, m.db, m.opts.Schema, m.opts.Table); err != nil {
			return nil, err
		}
	}
	m.ti = ti
	if resume == nil {
		if err := checkTable(ctx, m.db, ti); err != nil {
			return nil, err
		}
	}
	if err := planBlockers(ctx, m.db, ti, m.opts.Log); err != nil {
		return nil, err
	}
	ddl, err := ti.Shadow(table.ShadowName(ti.Name), true)
	if err != nil {
		return nil, outcome.New(outcome.Refused, err, "")
	}
	var sample *bench.GateResult
	if resume == nil {
		if sample, err = m.sampleGate(ctx); err != nil {
			return nil, err
		}
	}
	if err := m.store.Ensure(ctx); err != nil {
		return nil, outcome.New(outcome.Refused, err, "")
	}
	if resume != nil {
		m.state = *resume
		m.opts.Log("resuming migration #%d from %s (copy watermark %s, binlog %s:%d)", resume.ID, resume.Stage,
			orNone(resume.Watermark), resume.AppliedFile, resume.AppliedPos)
	} else {
		m.state = State{Schema: ti.Schema, Table: ti.Name, Stage: StagePreflight, DryRun: m.opts.DryRun, RowsTotal: ti.Rows}
		if err := m.store.Begin(ctx, &m.state); err != nil {
			return nil, outcome.New(outcome.Refused, err, "")
		}
	}
	if err := m.hook(ctx, "start"); err != nil {
		return nil, m.fail(ctx, outcome.New(outcome.FailedSafe, err, ""), resume != nil)
	}

	res, err := m.migrate(ctx, ddl, resume)
	if err != nil {
		return nil, err
	}
	if sample != nil {
		res.Gates = append([]bench.GateResult{*sample}, res.Gates...)
	}
	return res, nil
}

func (m *migrator) migrate(ctx context.Context, ddl table.ShadowDDL, resume *State) (*Result, error) {
	res := &Result{Schema: m.ti.Schema, Table: m.ti.Name, DryRun: m.opts.DryRun, ID: m.state.ID,
		DeferredIndex: len(ddl.Deferred), ShadowChanges: ddl.Changes}
	var err error
	if m.reader, err = dbconn.OpenRowReader(ctx, m.opts.Conn, "", 2); err != nil {
		return nil, m.fail(ctx, err, false)
	}
	defer m.reader.Close()
	if m.writer, err = dbconn.OpenRowWriter(ctx, m.opts.Conn, "", 4); err != nil {
		return nil, m.fail(ctx, err, false)
	}
	defer m.writer.Close()

	var startPos binlog.Position
	var resumeAfter []any
	deferred := ddl.Deferred
	if resume == nil {
		if _, err := m.db.ExecContext(ctx, ddl.Create); err != nil {
			return nil, m.fail(ctx, outcome.New(outcome.Refused, fmt.Errorf("create shadow table: %w", err), "run `enginemig plan` for this table"), false)
		}
	}
	shadowCreated := true
	// From here on, failures drop the shadow so a retry starts clean, except when the connection
	// to the server was lost: then the next run resumes from the state table.
	fail := func(err error) (*Result, error) {
		if errors.Is(err, errSimulatedCrash) {
			return nil, err
		}
		if isConnectionLoss(err) && ctx.Err() == nil {
			return nil, m.suspend(ctx, err)
		}
		return nil, m.fail(ctx, err, shadowCreated)
	}
	if resume != nil {
		var err error
		if resumeAfter, deferred, err = m.prepareResume(ctx, resume, ddl.Deferred); err != nil {
			return fail(err)
		}
		startPos = binlog.Position{Name: resume.AppliedFile, Pos: resume.AppliedPos}
	} else {
		// Capture starts before the first row is read: every change after this point is replayed.
		var err error
		if startPos, err = binlog.CurrentPosition(ctx, m.db); err != nil {
			return fail(err)
		}
		m.saveState(ctx, func(st *State) {
			st.StartFile, st.StartPos = startPos.Name, startPos.Pos
			st.AppliedFile, st.AppliedPos = startPos.Name, startPos.Pos
		})
	}
	m.stream, err = binlog.OpenStream(ctx, binlog.StreamConfig{Conn: m.opts.Conn, Flavor: binlog.Flavor(m.version),
		ServerID: m.opts.ServerID, Table: m.ti}, startPos)
	if err != nil {
		return fail(outcome.New(outcome.FailedSafe, err, "the user needs REPLICATION SLAVE (and BINLOG MONITOR or REPLICATION CLIENT)"))
	}
	defer m.stream.Close()
	applier, err := binlog.NewApplier(m.writer, m.ti, table.ShadowName(m.ti.Name))
	if err != nil {
		return fail(err)
	}
	gate := &sync.RWMutex{}
	cp, err := copier.New(m.reader, m.writer, m.ti, table.ShadowName(m.ti.Name), gate, copier.Config{ChunkTime: m.opts.ChunkTime,
		IdleChunkTime: m.opts.idleChunkTime, ClientSide: m.opts.ClientSide, Throttle: m.beforeChunk})
	if err != nil {
		return fail(err)
	}
	thr, closeReplicas, err := m.startThrottle(ctx)
	if err != nil {
		return fail(outcome.New(outcome.Refused, err, ""))
	}
	defer closeReplicas()
	m.stageMu.Lock()
	m.copy, m.thr = cp, thr
	m.stageMu.Unlock()
	m.replay = binlog.NewReplayer(m.stream, applier, gate)
	m.replay.Skip = m.copy.Skip
	m.replay.ApplyDelay = m.opts.replayDelay

	replayCtx, stopReplay := context.WithCancel(ctx)
	defer stopReplay()
	replayErr := make(chan error, 1)
	replayDone := make(chan struct{})
	go func() {
		defer close(replayDone)
		err := m.replay.Run(replayCtx)
		if err == nil && ctx.Err() == nil && replayCtx.Err() == nil {
			err = errors.New("binlog replay stopped unexpectedly")
		}
		if err == nil {
			err = context.Canceled
		}
		replayErr <- err
	}()
	// Never return while a replay batch may still be writing: a late write of an old batch
	// would land after whatever runs next (a resumed run, a cleanup).
	defer func() { stopReplay(); <-replayDone }()
	stopProgress := m.reportProgress(ctx)
	defer stopProgress()

	// Copy, stopping early if replay fails (e.g. DDL on the source).
	if err := m.setStage(ctx, StageCopy); err != nil {
		return fail(err)
	}
	if err := m.hook(ctx, "before-copy"); err != nil {
		return fail(outcome.New(outcome.FailedSafe, err, ""))
	}
	copyCtx, stopCopy := context.WithCancel(ctx)
	copyDone := make(chan error, 1)
	copyStart := time.Now()
	go func() { copyDone <- m.copy.Run(copyCtx, resumeAfter) }()
	select {
	case err = <-copyDone:
	case err = <-replayErr:
		stopCopy()
		<-copyDone
		if err == nil {
			err = errors.New("binlog replay stopped unexpectedly")
		}
		return fail(outcome.New(outcome.FailedSafe, fmt.Errorf("replay: %w", err), ""))
	}
	stopCopy()
	thr.Stop() // the throttle only ever holds back the copy
	if err != nil {
		return fail(outcome.New(outcome.FailedSafe, err, ""))
	}
	res.CopyTime, res.CopyLockTime, res.RowsCopied = time.Since(copyStart), m.copy.LockTime(), m.copy.Copied()
	m.opts.Log("copied %d rows in %s (source reads %s)", res.RowsCopied, res.CopyTime.Round(time.Millisecond), res.CopyLockTime.Round(time.Millisecond))
	if err := m.hook(ctx, "after-copy"); err != nil {
		return fail(outcome.New(outcome.FailedSafe, err, ""))
	}

	// Secondary indexes are built once the shadow has caught up with everything read by the copy:
	// only then does it hold one consistent source state, so a UNIQUE index cannot trip over a
	// mix of old and new row versions.
	if err := m.setStage(ctx, StageIndexes); err != nil {
		return fail(err)
	}
	if err := m.catchUp(ctx, replayErr); err != nil {
		return fail(err)
	}
	if len(deferred) > 0 {
		idxStart := time.Now()
		if err := m.execWatching(ctx, replayErr, table.AddIndexesDDL(m.ti.Schema, table.ShadowName(m.ti.Name), deferred)); err != nil {
			return fail(outcome.New(outcome.FailedSafe, fmt.Errorf("build secondary indexes on the shadow: %w", err), ""))
		}
		res.IndexTime = time.Since(idxStart)
		m.opts.Log("built %d secondary index(es) in %s", len(deferred), res.IndexTime.Round(time.Millisecond))
	}
	if err := m.postpone(ctx, replayErr); err != nil {
		return fail(err)
	}

	if !m.opts.SkipVerify {
		if err := m.setStage(ctx, StageVerify); err != nil {
			return fail(err)
		}
		v, err := m.verifyWatching(ctx, replayErr)
		if err != nil {
			return fail(outcome.New(outcome.FailedSafe, err, "the shadow was dropped; report this, and re-run apply"))
		}
		res.Verify = &v
		m.opts.Log("verified %d rows in %d chunks (%d recopied) in %s", v.Rows, v.Chunks, v.Repaired, v.Duration.Round(time.Millisecond))
	}
	if g, err := m.shadowGate(ctx); g != nil || err != nil {
		if g != nil {
			res.Gates = append(res.Gates, *g)
		}
		if err != nil {
			return fail(err)
		}
	}
	var probeBefore *bench.Result
	if m.opts.Gates[GateAfterCutover] && !m.opts.DryRun {
		m.opts.Log("after-cutover gate: read-only probes on %s before the swap", m.ti.Name)
		r, err := bench.ProbeReadOnly(ctx, m.db, m.ti.Schema, m.ti.Name, m.opts.GateConfig)
		if err != nil {
			return fail(outcome.New(outcome.FailedSafe, err, ""))
		}
		probeBefore = &r
	}

	if m.opts.DryRun {
		stopReplay()
		res.ReplayEvents = m.replay.Stats().Events
		m.dropShadow(ctx)
		shadowCreated = false
		m.finish(ctx, StageDryRun, "")
		res.TotalTime = time.Since(m.start)
		m.opts.Log("dry run complete: shadow dropped, %s unchanged", m.ti.QuotedName())
		return res, nil
	}

	if err := m.setStage(ctx, StageCutover); err != nil {
		return fail(err)
	}
	if err := m.hook(ctx, "before-cutover"); err != nil {
		return fail(outcome.New(outcome.FailedSafe, err, ""))
	}
	sw := cutover.Swap{Schema: m.ti.Schema, From: m.ti.Name, To: table.ShadowName(m.ti.Name), Aside: table.OldName(m.ti.Name),
		Sentry: table.SwapName(m.ti.Name)}
	cut, err := cutover.Run(ctx, m.db, sw, m.replay, m.opts.Cutover, m.recordCutoverPosition)
	var swapped *cutover.SwappedError
	if errors.As(err, &swapped) {
		m.finish(ctx, StageDone, err.Error()) // the cut-over position was recorded under the lock
		return nil, outcome.New(outcome.NeedsAttention, err, fmt.Sprintf("the table is converted; rename %s to %s by hand", sw.Sentry, sw.Aside))
	}
	if err != nil {
		if ctx.Err() == nil && !m.originalInPlace(context.WithoutCancel(ctx)) {
			return nil, m.fail(ctx, outcome.New(outcome.NeedsAttention, err, "check the tables named in this message by hand"), false)
		}
		return fail(outcome.New(outcome.FailedSafe, fmt.Errorf("cut-over: %w", err), "retry when the table is less busy, or raise --cutover-lock-wait"))
	}
	shadowCreated = false
	stopReplay()
	res.Cutover = &cut
	res.ReplayEvents = m.replay.Stats().Events
	res.OldTable = table.OldName(m.ti.Name)
	m.finish(ctx, StageDone, "") // the cut-over position was recorded under the lock
	if probeBefore != nil {
		if err := m.afterCutoverGate(ctx, res, *probeBefore); err != nil {
			return res, err
		}
	}
	m.hook(ctx, "success")
	res.TotalTime = time.Since(m.start)
	m.opts.Log("cut-over done in %d attempt(s), table locked %s; original kept as %s", cut.Attempts,
		cut.LockHeld.Round(time.Millisecond), dbconn.QualifiedName(m.ti.Schema, res.OldTable))
	return res, nil
}

// catchUp waits until replay has applied everything written up to now.
func (m *migrator) catchUp(ctx context.Context, replayErr <-chan error) error {
	pos, err := binlog.CurrentPosition(ctx, m.db)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.replay.WaitFor(waitCtx, pos) }()
	select {
	case err := <-done:
		return err
	case err := <-replayErr:
		return outcome.New(outcome.FailedSafe, fmt.Errorf("replay: %w", err), "")
	}
}

// verifyWatching runs verification while watching for replay failure.
func (m *migrator) verifyWatching(ctx context.Context, replayErr <-chan error) (verify.Result, error) {
	type out struct {
		r   verify.Result
		err error
	}
	done := make(chan out, 1)
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		r, err := verify.Run(vctx, m.db, m.ti, table.ShadowName(m.ti.Name), m.replay, verify.Config{ChunkTime: m.opts.ChunkTime, Log: m.opts.Log})
		done <- out{r, err}
	}()
	select {
	case o := <-done:
		return o.r, o.err
	case err := <-replayErr:
		cancel()
		<-done
		return verify.Result{}, fmt.Errorf("replay: %w", err)
	}
}

// execWatching runs a statement while watching for replay failure.
func (m *migrator) execWatching(ctx context.Context, replayErr <-chan error, stmt string) error {
	done := make(chan error, 1)
	execCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, err := m.db.ExecContext(execCtx, stmt)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case err := <-replayErr:
		cancel()
		<-done
		return outcome.New(outcome.FailedSafe, fmt.Errorf("replay: %w", err), "")
	}
}

// postpone holds the cut-over while the flag file exists (replay keeps the shadow current).
func (m *migrator) postpone(ctx context.Context, replayErr <-chan error) error {
	if m.opts.PostponeFile == "" {
		return nil
	}
	if _, err := os.Stat(m.opts.PostponeFile); err != nil {
		return nil
	}
	m.setStage(ctx, StagePostponed)
	m.opts.Log("cut-over postponed: remove %s to proceed", m.opts.PostponeFile)
	for {
		if _, err := os.Stat(m.opts.PostponeFile); err != nil {
			m.opts.Log("postpone file removed: proceeding")
			return nil
		}
		if !m.opts.PostponeUntil.IsZero() && time.Now().After(m.opts.PostponeUntil) {
			m.opts.Log("postpone deadline reached: proceeding")
			return nil
		}
		select {
		case <-m.ctl.release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case err := <-replayErr:
			return outcome.New(outcome.FailedSafe, fmt.Errorf("replay while postponed: %w", err), "")
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// recordCutoverPosition runs under the cut-over lock, before the rename: should this process die
// right after the rename, the next run finds the swap done and still knows the position a rollback
// must replay from. (AUTO_INCREMENT needs nothing here: the shadow is created with the source's
// counter, and every insert since is replayed with its id, which advances InnoDB's counter too.)
func (m *migrator) recordCutoverPosition(ctx context.Context, pos binlog.Position) error {
	m.saveState(ctx, func(st *State) { st.CutoverFile, st.CutoverPos = pos.Name, pos.Pos })
	return nil
}

// originalInPlace checks that the original table still exists under its name as MyISAM.
func (m *migrator) originalInPlace(ctx context.Context) bool {
	ti, err := table.Load(ctx, m.db, m.ti.Schema, m.ti.Name)
	return err == nil && ti.Engine == m.ti.Engine
}

func (m *migrator) dropShadow(ctx context.Context) {
	m.db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+dbconn.QualifiedName(m.ti.Schema, table.ShadowName(m.ti.Name)))
}

// fail records the failure, drops the shadow when asked and returns err (coded FailedSafe if it
// had no code).
func (m *migrator) fail(ctx context.Context, err error, dropShadow bool) error {
	bg := context.WithoutCancel(ctx)
	if dropShadow {
		m.dropShadow(bg)
	}
	if outcome.CodeOf(err) == outcome.Internal {
		err = outcome.New(outcome.FailedSafe, err, "")
	}
	if errors.Is(err, context.Canceled) {
		err = outcome.New(outcome.FailedSafe, errors.New("interrupted; the shadow table was dropped and the original is unchanged"), "")
	}
	m.finish(bg, StageFailed, err.Error())
	m.hook(bg, "failure")
	return err
}

func (m *migrator) finish(ctx context.Context, stage, errText string) {
	if m.store == nil || m.state.ID == 0 {
		return
	}
	now := time.Now().UTC()
	m.saveState(context.WithoutCancel(ctx), func(st *State) {
		st.Stage, st.Error, st.FinishedAt = stage, errText, &now
	})
}

func (m *migrator) setStage(ctx context.Context, stage string) error {
	m.saveState(ctx, func(st *State) { st.Stage = stage })
	if m.opts.crashAtStage == stage {
		return errSimulatedCrash
	}
	return nil
}

// beforeChunk runs before every copy chunk: the throttle may hold it back.
func (m *migrator) beforeChunk(ctx context.Context) error {
	if m.opts.crashAfterRows > 0 && m.copy.Copied() >= m.opts.crashAfterRows {
		m.saveState(ctx, func(*State) {})
		return errSimulatedCrash
	}
	return m.thr.Wait(ctx)
}

// startThrottle connects to the replicas and starts the heartbeat and checks.
func (m *migrator) startThrottle(ctx context.Context) (*throttle.Throttler, func(), error) {
	cfg := throttle.Config{MaxThreadsRunning: m.opts.MaxThreadsRunning, MaxLag: m.opts.MaxLag,
		HeartbeatSchema: m.store.schema, Log: m.opts.Log}
	var pools []*sql.DB
	closeAll := func() {
		for _, p := range pools {
			p.Close()
		}
	}
	for _, rc := range m.opts.Replicas {
		p, err := dbconn.Open(ctx, rc, "", 2)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("replica %s: %w", rc.Address(), err)
		}
		pools = append(pools, p)
		cfg.Replicas = append(cfg.Replicas, p)
		cfg.ReplicaNames = append(cfg.ReplicaNames, rc.Address())
	}
	thr := throttle.New(m.db, cfg)
	if err := thr.Start(ctx); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("start throttle: %w", err)
	}
	return thr, func() { thr.Stop(); closeAll() }, nil
}

// saveState updates the state row with the current counters after mutate; the progress goroutine
// saves too, so all access to m.state goes through here.
func (m *migrator) saveState(ctx context.Context, mutate func(*State)) {
	m.stageMu.Lock()
	defer m.stageMu.Unlock()
	mutate(&m.state)
	m.stage = m.state.Stage
	if m.copy != nil {
		m.state.RowsCopied = m.copy.Copied()
		m.state.Watermark = encodeKey(m.copy.Watermark())
	}
	if m.replay != nil {
		m.state.EventsApplied = m.replay.Stats().Events
		// The copy watermark is read first: both only move forward, and a resume needs every
		// chunk up to the saved watermark written and every change up to the saved position applied.
		if p := m.replay.ResumeAt(); p.Name != "" {
			m.state.AppliedFile, m.state.AppliedPos = p.Name, p.Pos
		}
	}
	if m.store != nil && m.state.ID != 0 {
		m.store.Save(ctx, &m.state)
	}
}

// hook runs the user's hook with a fresh snapshot of the state.
func (m *migrator) hook(ctx context.Context, stage string) error {
	if m.opts.Hook == nil {
		return nil
	}
	m.saveState(ctx, func(*State) {})
	m.stageMu.Lock()
	snapshot := m.state
	m.stageMu.Unlock()
	return m.opts.Hook(ctx, stage, &snapshot)
}

// reportProgress calls Options.Progress periodically and saves the copy watermark to the state
// table, until the returned stop is called.
func (m *migrator) reportProgress(ctx context.Context) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(m.opts.ProgressEvery)
		defer tick.Stop()
		lastSave := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m.stageMu.Lock()
			stage := m.stage
			m.stageMu.Unlock()
			st := m.replay.Stats()
			p := Progress{Stage: stage, RowsCopied: m.copy.Copied(), RowsTotal: m.ti.Rows, ChunkSize: m.copy.ChunkSize(),
				ReplayEvents: st.Events, CatchingUp: st.Behind, Elapsed: time.Since(m.start)}
			if m.opts.Progress != nil {
				m.opts.Progress(p)
			}
			if time.Since(lastSave) > m.opts.saveEvery {
				lastSave = time.Now()
				m.saveState(ctx, func(*State) {})
			}
		}
	}()
	return func() { close(stop); <-done }
}

// suspend records a migration interrupted by a lost connection: the shadow and the state stay so
// that running the same apply again resumes it.
func (m *migrator) suspend(ctx context.Context, err error) error {
	m.saveState(context.WithoutCancel(ctx), func(st *State) { st.Error = "connection lost: " + err.Error() })
	return outcome.New(outcome.NeedsAttention, fmt.Errorf("%w to the server: %w", errSuspended, err),
		"the shadow table and the progress are kept: run the same apply again to resume")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
