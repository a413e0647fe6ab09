package shadow

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Mode is how a pipeline captures the source's changes. Each mode is one kind (captures): its
// set-up, its resume rules and its tear-down live with it, so the runner never asks which it is.
type Mode string

const (
	// Binlog reads the binary log as a replica (needs log_bin, binlog_format=ROW, FULL row images).
	Binlog Mode = "binlog"
	// Triggers notes changed keys with triggers on the source (any binlog setting, or none).
	Triggers Mode = "triggers"
)

// ModeOf reads a recorded mode; records of versions before trigger capture have none: binlog.
func ModeOf(s string) Mode {
	if s == "" {
		return Binlog
	}
	return Mode(s)
}

// Position is a point in a capture's stream of changes, spelled by the capture (binlog:
// "file:offset"); empty where the capture has none (trigger capture starts now and keeps its
// notes in the change log). The runner stores it as text and hands it back unread.
type Position string

// Stats are a capture's counters for progress, status and metrics.
type Stats struct {
	// Changes counts the changes captured for the table: row changes read from the binlog, or
	// noted keys synced.
	Changes int64
	// Applied counts the writes to the target: replayed operations (after the ordering rule left
	// some to the copy), or syncs.
	Applied int64
	// Position is where every change has been applied up to ("" without one).
	Position Position
	// Behind: a backlog was waiting at the last batch or sync.
	Behind bool
	// LagSeconds is how long ago the oldest change read but not yet applied happened (0 when
	// the capture cannot tell, or nothing waits).
	LagSeconds float64
}

// Capture brings the source's changes into the target while the application writes, from Open
// (its set-up ran before the first row is copied) until Close.
type Capture interface {
	// Run delivers changes until ctx ends (then it returns nil) or delivery fails.
	Run(ctx context.Context) error
	// WaitFor returns once every change committed before the call is in the target, and the
	// position that stands for that moment. q reads it; held says what q holds locked.
	WaitFor(ctx context.Context, q dbconn.Execer, held Held) (Position, error)
	// LockWith lists what a session must lock with the source for WaitFor with held.
	LockWith(held Held) []string
	// CopyMode is how the copy must write so that it never undoes a captured change.
	CopyMode() table.WriteMode
	// Hold stops the capture's own writes to the target until Release, waiting for one in
	// flight to end (Pipeline.Hold says who needs that).
	Hold()
	Release()
	// ResumeAt is where a resumed capture may restart (see order, rule 4).
	ResumeAt() Position
	// Start is where the capture started.
	Start() Position
	Stats() Stats
	// Close stops delivery; what the set-up installed stays, for a resumed run (kind.remove).
	Close()
}

// barrierCapture is a Capture that can stop its writes to the target at a position (binlog
// capture), so that verification lets the source go before it compares the target
// (verify.Target.Mark).
type barrierCapture interface {
	// Barrier reads the position on q, which holds the source read-locked, and stops the
	// capture's writes of any later change until lift.
	Barrier(ctx context.Context, q dbconn.Execer) (pos Position, lift func(), err error)
	// Reached returns once every change up to pos is in the target.
	Reached(ctx context.Context, pos Position) error
}

// Held is what the session passed to Capture.WaitFor holds locked.
type Held int

const (
	// HeldNone: nothing; capture takes whatever locks it needs itself.
	HeldNone Held = iota
	// HeldForVerify: the source READ-locked, with LockWith(HeldForVerify).
	HeldForVerify
	// HeldForSwap: the source and the cut-over sentry WRITE-locked, with LockWith(HeldForSwap),
	// which never names the target: the swap's RENAME takes its metadata locks in name order, and
	// must queue on the source, not on a target the session holds (table.SwapName).
	HeldForSwap
)

// kind is one way to capture, with everything about it that needs no open capture: a third
// kind is a file that implements it and adds itself to captures.
type kind interface {
	// open sets the capture up (install) and starts it from p.cfg.Start (empty: from now).
	open(ctx context.Context, p *Pipeline) (Capture, error)
	// install puts in place on the server what the capture needs there (whichever parts are
	// missing), without capturing.
	install(ctx context.Context, cfg Config) error
	// setupRemedy says what to do when open fails for want of a privilege or setting.
	setupRemedy() string
	// resumable says why a capture cannot restart from pos, and what to do about it ("" when
	// it can).
	resumable(ctx context.Context, db *sql.DB, pos Position) (why, remedy string, err error)
	// needsStart: the capture replays history from a position, so it cannot restart without one.
	needsStart() bool
	// remove drops whatever open set up for cfg (whichever parts exist).
	remove(ctx context.Context, cfg Config) error
	// leftovers drops whatever any run on the table left behind, and names it.
	leftovers(ctx context.Context, db *sql.DB, schema, name string) ([]string, error)
	// now is the server's current position, and behind how far saved trails it (0 and "" when
	// the kind cannot tell).
	now(ctx context.Context, db *sql.DB) (Position, error)
	behind(saved, server Position) (bytes int64, text string)
}

// captures lists the kinds, in the order Remove and RemoveLeftovers visit them.
var captures = []struct {
	mode Mode
	kind kind
}{{Binlog, binlogKind{}}, {Triggers, triggerKind{}}}

func kindOf(m Mode) (kind, error) {
	for _, c := range captures {
		if c.mode == m {
			return c.kind, nil
		}
	}
	return nil, fmt.Errorf("unknown capture %q (binlog or triggers)", m)
}

// SetupRemedy says what to do when opening a pipeline with mode failed.
func (m Mode) SetupRemedy() string {
	if k, err := kindOf(m); err == nil {
		return k.setupRemedy()
	}
	return ""
}

// CheckResume says why mode's capture cannot restart from pos (an interrupted run's resume
// position, or a cut-over position for a rollback), and what to do about it; "" when it can.
func CheckResume(ctx context.Context, db *sql.DB, mode Mode, pos Position) (why, remedy string, err error) {
	k, err := kindOf(mode)
	if err != nil {
		return "", "", err
	}
	return k.resumable(ctx, db, pos)
}

// Recorded reports whether pos is enough for mode's capture to start from: a capture that replays
// history needs a position, one that starts now (triggers) needs none.
func Recorded(mode Mode, pos Position) bool {
	k, err := kindOf(mode)
	return err == nil && (pos != "" || !k.needsStart())
}

// Install runs the set-up of cfg.Mode's capture (what Open does first) without capturing: for
// measuring what it costs the application's writes. Remove undoes it.
func Install(ctx context.Context, cfg Config) error {
	k, err := kindOf(ModeOf(string(cfg.Mode)))
	if err != nil {
		return err
	}
	return k.install(ctx, cfg)
}

// Remove drops whatever any capture set up for cfg (its DB, Source, Target and ChangeLog), so it
// also works after a failed Open and without knowing the mode. It runs before the target is
// dropped on every path: a capture trigger left behind would write to a log that is gone, and
// fail the application's writes.
func Remove(ctx context.Context, cfg Config) error {
	for _, c := range captures {
		if err := c.kind.remove(ctx, cfg); err != nil {
			return err
		}
	}
	return nil
}

// RemoveLeftovers drops what captures of any run on the table left (cleanup after a run that
// died), and names it.
func RemoveLeftovers(ctx context.Context, db *sql.DB, schema, name string) ([]string, error) {
	var dropped []string
	for _, c := range captures {
		d, err := c.kind.leftovers(ctx, db, schema, name)
		dropped = append(dropped, d...)
		if err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// Now is the server's current position in mode's terms ("" when the capture has none).
func Now(ctx context.Context, db *sql.DB, mode Mode) (Position, error) {
	k, err := kindOf(mode)
	if err != nil {
		return "", err
	}
	return k.now(ctx, db)
}

// Behind says how far saved trails the server's position server (see Now), in bytes where the
// capture can count them; 0 and "" when it cannot tell.
func Behind(mode Mode, saved, server Position) (bytes int64, text string) {
	k, err := kindOf(mode)
	if err != nil || saved == "" || server == "" {
		return 0, ""
	}
	return k.behind(saved, server)
}
