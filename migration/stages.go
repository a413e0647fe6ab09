package migration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/enginemig/enginemig/answers"
	"github.com/enginemig/enginemig/copier"
	"github.com/enginemig/enginemig/cutover"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/internal/db/table"
	"github.com/enginemig/enginemig/migration/state"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/plan"
	"github.com/enginemig/enginemig/shadow"
)

// stage is one row of the runner's table. A recorded stage (stage set) is written to the state
// row on entering, with the hooks before and after it; a step between stages (step set: a gate,
// opening the shadow) is not. A stage that ends the run (end set) returns the run's result.
type stage struct {
	stage state.Stage
	step  string
	// skip, when set, says the stage has nothing to do this time.
	skip func() bool
	run  func(ctx context.Context) error
	end  func(ctx context.Context) (*Result, error)
	// unrecorded: the run has no record yet (nothing was created), so a failure is returned as
	// it is, with nothing to settle.
	unrecorded bool
}

// stages is the runner's table, in order. A dry run ends at the boundary before the cut-over.
func (m *migrator) stages() []stage {
	resumed := func() bool { return m.resume != nil }
	return []stage{
		{step: "preflight", unrecorded: true, run: m.preflight},
		{step: "interrupted run finished", skip: func() bool { return m.settledDone == nil }, end: m.endSettled},
		{step: "answers check", unrecorded: true, skip: resumed, run: m.answersGate},
		{step: string(GateBeforeCopy) + " gate", unrecorded: true, skip: resumed, run: m.sampleGate},
		{step: "start", unrecorded: true, run: m.begin},
		{step: "disk", run: m.watchDisk},
		{step: "shadow", run: m.openShadow},
		{stage: state.StageCopy, skip: m.resumedAtSwap, run: m.copyRows},
		{stage: state.StageIndexes, skip: func() bool { return m.resumedAtSwap() && len(m.deferred) == 0 }, run: m.buildIndexes},
		{stage: state.StagePostponed, skip: m.notPostponed, run: m.postpone},
		{stage: state.StageVerify, skip: func() bool { return m.opts.SkipVerify || m.resumedAtSwap() }, run: m.verify},
		{step: string(GateBeforeCutover) + " gate", run: m.shadowGate},
		{step: "dry-run stop", skip: func() bool { return !m.opts.DryRun }, end: m.endDryRun},
		{stage: state.StageCutover, run: m.cutover},
		{stage: state.StageTriggers, skip: func() bool { return len(m.triggers) == 0 }, run: m.finishTriggers},
		{step: "done", run: m.recordDone},
		{step: string(GateAfterCutover) + " gate", skip: func() bool { return m.probe == nil }, run: m.afterCutoverGate},
		{step: "success", end: m.succeeded},
	}
}

// run passes the stages in order until one ends the run or fails; what the stages opened is
// closed when it returns.
func (m *migrator) run(ctx context.Context) (*Result, error) {
	defer m.closeAll()
	for _, s := range m.stages() {
		if s.skip != nil && s.skip() {
			continue
		}
		if s.end != nil {
			return s.end(ctx)
		}
		err := m.pass(ctx, s)
		switch {
		case err == nil:
		case s.unrecorded:
			return nil, err
		default:
			return m.stopped(ctx, err)
		}
	}
	return nil, errors.New("the stage table has no end") // unreachable: its last row ends the run
}

// pass runs one stage, entering it (record and hooks) when it is a recorded one.
func (m *migrator) pass(ctx context.Context, s stage) error {
	if s.stage == "" {
		return s.run(ctx)
	}
	if err := m.enter(ctx, s.stage); err != nil {
		return err
	}
	if err := s.run(ctx); err != nil {
		return err
	}
	if err := m.hook(ctx, After(s.stage)); err != nil {
		return outcome.New(outcome.FailedSafe, err, "")
	}
	return nil
}

// onExit registers what closes something a stage opened (in reverse order, when the run ends).
func (m *migrator) onExit(close func()) { m.closers = append(m.closers, close) }

func (m *migrator) closeAll() {
	for i := len(m.closers) - 1; i >= 0; i-- {
		m.closers[i]()
	}
	m.closers = nil
}

// endSettled ends a run that found the interrupted one had completed its swap (preflight
// recorded it as done).
func (m *migrator) endSettled(context.Context) (*Result, error) { return m.settledDone, nil }

// openShadow creates the shadow, opens the pipeline that keeps it equal to the source, and starts
// the pacing and the progress reports; the run closes them when it ends.
func (m *migrator) openShadow(ctx context.Context) error {
	if err := m.openPipeline(ctx); err != nil {
		return err
	}
	m.onExit(func() { m.pipe.Close() })
	stopPace, err := m.startPace(ctx)
	if err != nil {
		return err
	}
	m.onExit(stopPace)
	m.onExit(m.rec.track(ctx, m.pipe, m.opts, m.start, m.sampledCost))
	return nil
}

// enter records the stage and runs the hook before it.
func (m *migrator) enter(ctx context.Context, s state.Stage) error {
	m.rec.update(ctx, func(st *state.State) { st.Stage = s })
	if at := faultsOf(ctx).CrashAtStage(); at != "" && at == string(s) {
		return errSimulatedCrash
	}
	if err := m.hook(ctx, Before(s)); err != nil {
		return outcome.New(outcome.FailedSafe, err, "")
	}
	return nil
}

// openPipeline creates the shadow (or rewinds the one being resumed) and starts capture. Capture
// starts before the first row is read: every change after its start position is replayed.
func (m *migrator) openPipeline(ctx context.Context) error {
	cfg := applyCapture(m.db, m.ti, m.capture)
	if m.resume == nil {
		if err := m.createShadow(ctx); err != nil {
			return &keepShadow{outcome.New(outcome.Refused, fmt.Errorf("create shadow table: %w", err), "run `enginemig plan` for this table")}
		}
	} else {
		deferred, err := m.prepareResume(ctx, m.resume, m.ddl.Deferred)
		if err != nil {
			return err
		}
		m.deferred = deferred
		m.resumeStopwords(ctx)
		cfg.Start = m.resume.CaptureResume
	}
	cfg.Conn, cfg.Version, cfg.ServerID, cfg.Triggers, cfg.Logger = m.opts.Conn, m.version, m.opts.ServerID, triggerNames(m.triggers), m.log
	cfg.Galera = m.opts.Cutover.Galera
	cfg.LockWithin = lockwait.TimeoutOr(m.opts.LockTimeout)
	if m.budget != nil {
		cfg.Hold = budgetHold{m.budget, m.log}
	}
	p, err := shadow.Open(ctx, cfg)
	if err != nil {
		return outcome.New(outcome.FailedSafe, err, m.capture.SetupRemedy())
	}
	m.pipe = p
	m.pipeLive.Store(p)
	m.rec.attach(p)
	if m.resume == nil {
		m.rec.update(ctx, func(st *state.State) { st.CaptureStart = p.Start() })
	}
	return nil
}

func (m *migrator) copyRows(ctx context.Context) error {
	thr, closeThrottle, err := m.startThrottle(ctx)
	if err != nil {
		return outcome.New(outcome.Refused, err, "")
	}
	defer closeThrottle() // the throttle only ever holds back the copy
	m.ctl.setThrottle(thr)
	var resumeAfter []any
	if m.resume != nil {
		if resumeAfter, err = state.DecodeKey(m.resume.Watermark); err != nil {
			return err
		}
	}
	start := time.Now()
	hooks, chunkTime := faultsOf(ctx), m.opts.ChunkTime
	if hooks.CopyChunkTime() > 0 {
		chunkTime = hooks.CopyChunkTime()
	}
	cfg := copier.Config{Pace: copier.Pace{ChunkTime: chunkTime, IdleChunkTime: hooks.IdleChunkTime(), FirstChunk: hooks.FirstChunk(), Room: m.room(), MaxChunk: m.copyMaxChunk()},
		ClientSide: m.opts.ClientSide, Workers: m.copyWorkers(ctx), WriteApart: m.opts.Cutover.Galera}
	if err := m.pipe.Copy(ctx, resumeAfter, m.copyWaiter(ctx, thr), cfg); err != nil {
		return m.coded(err)
	}
	pr := m.pipe.Progress()
	m.res.CopyTime, m.res.CopyLockTime, m.res.RowsCopied, m.res.CopyWorkers = time.Since(start), pr.CopyLockTime, pr.RowsCopied, max(cfg.Workers, 1)
	m.log.Info("copied", "rows", pr.RowsCopied, "took", m.res.CopyTime.Round(time.Millisecond), "source_reads", pr.CopyLockTime.Round(time.Millisecond),
		"staged_chunks", pr.StagedChunks, "workers", cfg.Workers, "steps", pr.CopyWalk.Steps, "held", pr.CopyWalk.Held.Round(time.Millisecond),
		"rests", pr.CopyWalk.Rest.Round(time.Millisecond), "walk", pr.CopyWalk.Time.Round(time.Millisecond))
	return nil
}

// clientChunkBytes bounds what a client-side copy's chunk holds in enginemig's memory: the chunk
// is read whole before it is written, and the next is read meanwhile (copier/clientside.go). On
// a table of 2 MB rows its first 1000 rows were 235 MB, chunks of 32 MB 102 MB at the peak
// (TestWideRowsStayWithinMemory, client-side); at the usual row of a few hundred bytes 8 MB is
// tens of thousands of rows, more than a chunk's time allows.
const clientChunkBytes = 8 << 20

// copyMaxChunk caps a copy chunk's rows: a Galera node's write-set limits, and for a client-side
// copy clientChunkBytes at the table's average row (0: no cap).
func (m *migrator) copyMaxChunk() int {
	limit := m.galeraMaxChunk
	if avg := m.ti.DataLength / max(m.ti.Rows, 1); m.opts.ClientSide && avg > 0 {
		byBytes := int(max(clientChunkBytes/avg, 1))
		if limit == 0 || byBytes < limit {
			limit = byBytes
		}
	}
	return limit
}

// DefaultCopyWorkers is how many chunks are copied at once while nobody waits for the table, where
// InnoDB lets them run in parallel: two make an idle copy much faster than one
// (docs/how-it-works/copy.md, "Chunks that hold the source briefly"; figures:
// docs/bench/constants.md, "Behind the design pages' choices").
const DefaultCopyWorkers = 2

// copyWorkers is Options.CopyWorkers, or when 0, DefaultCopyWorkers where InnoDB lets the
// shadow's inserts run side by side (plan.ParallelCopy), else 1. A client-side copy reads and
// writes one chunk at a time.
func (m *migrator) copyWorkers(ctx context.Context) int {
	if m.opts.CopyWorkers > 0 {
		return m.opts.CopyWorkers
	}
	if m.opts.ClientSide || m.ti.Keyless() {
		return 1 // a keyless table's chunks go one at a time (shadow/order.go, rule 5)
	}
	mariaDB, mode := dbconn.MariaDB(m.version), int64(0)
	if _, ok := m.ti.AutoIncrementColumn(); ok && !mariaDB { // the only case the mode decides
		if err := m.db.QueryRowContext(ctx, table.AutoIncLockMode).Scan(&mode); err != nil {
			m.log.Debug("innodb_autoinc_lock_mode unread", "error", err)
		}
	}
	if ok, why := plan.ParallelCopy(mariaDB, mode, m.ti); !ok {
		m.log.Info("copying one chunk at a time: "+why, "server", m.version)
		return 1
	}
	return DefaultCopyWorkers
}

// buildIndexes adds the deferred secondary indexes once the shadow has caught up with everything
// read by the copy: only then does it hold one consistent source state, so a UNIQUE index cannot
// trip over a mix of old and new row versions. FULLTEXT indexes come first, one ALTER each: their
// builds keep writes to the shadow out (LOCK=SHARED), so binlog replay waits for each to end, and
// verification starts only beside the online build of the others (startVerifyBeside).
func (m *migrator) buildIndexes(ctx context.Context) error {
	builds := table.AddIndexesDDL(m.ti.Schema, table.ShadowName(m.ti.Name), m.deferred)
	if len(builds) > 0 && !builds[0].Fulltext {
		m.startVerifyBeside(ctx)
	}
	if err := m.pipe.CatchUp(ctx); err != nil {
		return m.coded(err)
	}
	start := time.Now()
	for _, b := range builds {
		if !b.Fulltext {
			m.startVerifyBeside(ctx)
		}
		if err := m.waitDiskRoom(ctx); err != nil {
			return m.coded(err)
		}
		st := m.stopwords
		if !b.Fulltext {
			st = ""
		}
		if err := m.pipe.Build(ctx, func(ctx context.Context) error { return answers.CreateWithStopwords(ctx, m.db, st, b.DDL) }); err != nil {
			return m.coded(fmt.Errorf("build secondary indexes on the shadow: %w", err))
		}
	}
	if len(builds) == 0 {
		return nil
	}
	m.res.IndexTime = time.Since(start)
	m.log.Info("built secondary indexes", "count", len(m.deferred), "statements", len(builds), "took", m.res.IndexTime.Round(time.Millisecond))
	return nil
}

// startVerifyBeside starts verification beside the index build where it can (binlog capture, room
// for it on the server, not already started). A FULLTEXT build must not be running or to come: a
// chunk's wait for replay, held behind the build's lock, would outlast its patience on a big table.
func (m *migrator) startVerifyBeside(ctx context.Context) {
	if !m.opts.SkipVerify && !m.resumedAtSwap() && m.roomBeside() && m.pipe.StartVerify(ctx, m.verifyPace()) {
		m.log.Info("verifying beside the index build")
	}
}

// resumedAtSwap reports a resumed run that had finished its copy, index build and verification:
// it was at the cut-over (waiting for the swap to get in, or killed there), and capture has kept
// the shadow current since, so it goes straight to the cut-over. Unique indexes dropped for the
// resume (prepareResume) are built again first.
func (m *migrator) resumedAtSwap() bool {
	return m.resume != nil && m.resume.Stage == state.StageCutover
}

func (m *migrator) notPostponed() bool {
	if m.opts.PostponeFile == "" {
		return true
	}
	_, err := os.Stat(m.opts.PostponeFile)
	return err != nil
}

// postpone holds the cut-over while the flag file exists (capture keeps the shadow current).
func (m *migrator) postpone(ctx context.Context) error {
	m.log.Info("cut-over postponed: remove the file to proceed", "file", m.opts.PostponeFile)
	_, endWait := m.ctl.waits.Begin(lockwait.Wait{Kind: lockwait.KindPostponed, What: postponedUntil(m.opts)})
	defer endWait()
	err := m.pipe.Do(ctx, func(ctx context.Context) error {
		for {
			if _, err := os.Stat(m.opts.PostponeFile); err != nil {
				m.log.Info("postpone file removed: proceeding")
				return nil
			}
			if !m.opts.PostponeUntil.IsZero() && time.Now().After(m.opts.PostponeUntil) {
				m.log.Info("postpone deadline reached: proceeding")
				return nil
			}
			select {
			case <-m.ctl.released():
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	return m.coded(err)
}

// verifyPace sizes verification's chunks: the lock-time target of the copy's contended chunks.
func (m *migrator) verifyPace() copier.Pace {
	return copier.Pace{ChunkTime: m.opts.ChunkTime, Room: m.room(), MaxChunk: m.galeraMaxChunk}
}

// verify compares the shadow with the source, or waits for the comparison started beside the
// index build (binlog capture).
func (m *migrator) verify(ctx context.Context) error {
	v, err := m.pipe.Verify(ctx, m.verifyPace())
	if err != nil {
		return outcome.New(outcome.FailedSafe, err, "the shadow was dropped; report this, and re-run apply")
	}
	m.res.Verify = &v
	m.log.Info("verified", "rows", v.Rows, "chunks", v.Chunks, "recopied", v.Repaired, "took", v.Duration.Round(time.Millisecond),
		"held", v.LockTime.Round(time.Millisecond), "lock_wait", v.LockWait.Round(time.Millisecond), "after_release", v.AfterRelease.Round(time.Millisecond), "rests", v.Rests.Round(time.Millisecond))
	return nil
}

// endDryRun is the boundary a dry run stops at: everything up to the swap was done and verified.
func (m *migrator) endDryRun(ctx context.Context) (*Result, error) {
	if err := m.pipe.Stop(); err != nil {
		return m.stopped(ctx, m.coded(err))
	}
	m.res.CaptureChanges = m.pipe.Progress().Capture.Changes
	m.res.Triggers = m.carrier().Statements(table.ShadowName(m.ti.Name))
	if err := m.dropShadow(ctx); err != nil {
		m.log.Warn("dry run: could not drop the shadow; `enginemig cleanup` removes it", "error", err)
	}
	m.rec.finish(ctx, state.StageDryRun, "")
	m.res.TotalTime = time.Since(m.start)
	m.log.Info("dry run complete: shadow dropped, original unchanged", "table", m.ti.QuotedName())
	return m.res, nil
}

func (m *migrator) cutover(ctx context.Context) error {
	m.stopPace()
	if w := m.opts.CutoverWindow; w != nil {
		// Before the budget and the probe: both must be fresh when the swap starts.
		if err := m.waitCutoverWindow(ctx, w); err != nil {
			return err
		}
	}
	if m.budget != nil {
		// The swap, its catch-up and the trigger carry are a burst of statements: they wait,
		// like the copy and verification, while the account's hourly share is spent.
		if err := m.budget.Wait(ctx, m.log); err != nil {
			return m.coded(err)
		}
	}
	var err error
	if m.probe, err = m.probeBeforeCutover(ctx); err != nil {
		return err
	}
	sw := cutover.Swap{Schema: m.ti.Schema, From: m.ti.Name, To: table.ShadowName(m.ti.Name), Aside: table.OldName(m.ti.Name),
		Sentry: table.SwapName(m.ti.Name), LockWith: m.pipe.SwapLockWith()}
	cut, err := m.swapInWindow(ctx, sw)
	var swapped *cutover.SwappedError
	switch {
	case errors.As(err, &swapped):
		m.rec.finish(ctx, state.StageDone, err.Error()) // the cut-over position was recorded under the lock
		remedy := fmt.Sprintf("the table is converted; rename %s to %s by hand", sw.Sentry, sw.Aside)
		if errors.Is(err, cutover.ErrRenamedLate) {
			remedy = fmt.Sprintf("the table is converted; compare %s with %s for the rows written in the moment between the unlock and the rename, and copy what is missing", sw.Aside, sw.From)
		}
		return &settled{outcome.New(outcome.NeedsAttention, err, remedy)}
	case err != nil && ctx.Err() == nil && !m.originalInPlace(context.WithoutCancel(ctx)):
		return &keepShadow{outcome.New(outcome.NeedsAttention, err, "check the tables named in this message by hand")}
	case errors.Is(err, cutover.ErrGaveUp) && ctx.Err() == nil:
		return &pending{err}
	case err != nil:
		return outcome.New(outcome.FailedSafe, fmt.Errorf("cut-over: %w", m.coded(err)), "retry when the table is less busy, or raise --cutover-lock-wait")
	}
	m.pipe.StopAfterSwap()
	// What the capture set up left with the original (now the kept table): nothing writes there.
	if err := m.pipe.Remove(context.WithoutCancel(ctx)); err != nil {
		m.log.Warn("could not remove the capture's triggers from the kept original; `enginemig cleanup` removes them", "error", err)
	}
	m.res.Cutover, m.res.OldTable = &cut, table.OldName(m.ti.Name)
	m.res.CaptureChanges = m.pipe.Progress().Capture.Changes
	m.log.Info("cut-over done", "attempts", cut.Attempts, "lock_held", cut.LockHeld.Round(time.Millisecond),
		"original_kept_as", dbconn.QualifiedName(m.ti.Schema, m.res.OldTable))
	return nil
}

// recordDone records a migration whose swap went through (and whose triggers are carried).
func (m *migrator) recordDone(ctx context.Context) error {
	m.rec.finish(ctx, state.StageDone, "") // the cut-over position was recorded under the lock
	return nil
}

// succeeded ends a migration that is done and passed the after-cutover gate.
func (m *migrator) succeeded(ctx context.Context) (*Result, error) {
	m.hook(ctx, PointSuccess)
	m.res.TotalTime = time.Since(m.start)
	return m.res, nil
}

// coded gives an error from the pipeline its outcome: a capture failure stops the migration with
// the original in place.
func (m *migrator) coded(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, shadow.ErrCapture) {
		return outcome.New(outcome.FailedSafe, fmt.Errorf("replay: %w", err), "")
	}
	if outcome.CodeOf(err) == outcome.Internal {
		return outcome.New(outcome.FailedSafe, err, "")
	}
	return err
}
