package shadow

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/dbconn"
	"github.com/enginemig/enginemig/table"
)

// Capture brings the source's changes into the target while the application writes: from the
// binlog (binlogCapture) or through triggers and a change log (triggerCapture, triggers.go).
type Capture interface {
	// Run delivers changes until ctx ends (then it returns nil) or delivery fails.
	Run(ctx context.Context) error
	// WaitFor returns once every change committed before the call is in the target, and the
	// binlog position that stands for that moment (empty without a binlog). q reads the position;
	// held says what q holds locked.
	WaitFor(ctx context.Context, q dbconn.Execer, held Held) (binlog.Position, error)
	// LockWith lists what a session must lock with the source for WaitFor with held.
	LockWith(held Held) []string
	// CopyMode is how the copy must write so that it never undoes a captured change.
	CopyMode() table.WriteMode
	// ResumeAt is where a resumed capture may restart (see order, rule 4).
	ResumeAt() binlog.Position
	Stats() binlog.Stats
	Close()
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

// binlogCapture reads the binlog as a replica and replays the table's row events in batches.
type binlogCapture struct {
	stream *binlog.Stream
	replay *binlog.Replayer
}

func openBinlog(ctx context.Context, cfg Config, apply binlog.ApplyFunc) (*binlogCapture, error) {
	stream, err := binlog.OpenStream(ctx, binlog.StreamConfig{Conn: cfg.Conn, Flavor: cfg.Flavor, ServerID: cfg.ServerID,
		Table: cfg.Source, IgnoreQuery: cfg.IgnoreQuery, Triggers: cfg.Triggers}, cfg.Start)
	if err != nil {
		return nil, err
	}
	r := binlog.NewReplayer(stream, apply)
	r.ApplyDelay = cfg.ApplyDelay
	return &binlogCapture{stream: stream, replay: r}, nil
}

func (b *binlogCapture) Run(ctx context.Context) error { return b.replay.Run(ctx) }

func (b *binlogCapture) WaitFor(ctx context.Context, q dbconn.Execer, _ Held) (binlog.Position, error) {
	pos, err := binlog.CurrentPosition(ctx, q)
	if err != nil {
		return pos, err
	}
	if err := b.replay.WaitFor(ctx, pos); err != nil {
		return pos, fmt.Errorf("replay did not reach %s: %w", pos, err)
	}
	return pos, nil
}

func (b *binlogCapture) LockWith(Held) []string    { return nil }
func (b *binlogCapture) CopyMode() table.WriteMode { return table.Replace }
func (b *binlogCapture) ResumeAt() binlog.Position { return b.replay.ResumeAt() }
func (b *binlogCapture) Stats() binlog.Stats       { return b.replay.Stats() }
func (b *binlogCapture) Close()                    { b.stream.Close() }

var _ Capture = (*binlogCapture)(nil)

// querier is satisfied by *sql.DB and *sql.Conn.
var _ binlog.Querier = (*sql.Conn)(nil)
