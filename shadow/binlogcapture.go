package shadow

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/enginemig/enginemig/binlog"
	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// binlogCapture reads the binlog as a replica and replays the table's row events in batches,
// through the ordering rule (order.replay).
type binlogCapture struct {
	stream *binlog.Stream
	replay *binlog.Replayer
	start  binlog.Position
	apply  func(ctx context.Context, batch []binlog.Change) (int, error)
}

// binlogKind: set-up is reading the current position (before the first row is copied); nothing
// stays on the server, and a restart needs the binlog file of its position.
type binlogKind struct{}

func (binlogKind) open(ctx context.Context, p *Pipeline) (Capture, error) {
	cfg := p.cfg
	start, err := parseBinlogPos(cfg.Start)
	if err != nil {
		return nil, err
	}
	if cfg.Start == "" {
		if start, err = binlog.CurrentPosition(ctx, cfg.DB); err != nil {
			return nil, err
		}
	}
	stream, err := binlog.OpenStream(ctx, binlog.StreamConfig{Conn: cfg.Conn, Flavor: binlog.Flavor(cfg.Version), ServerID: cfg.ServerID,
		Table: cfg.Source, IgnoreQuery: cfg.IgnoreQuery, Triggers: cfg.Triggers}, start)
	if err != nil {
		return nil, err
	}
	replay := binlog.NewReplayer(stream)
	if cfg.Hold != nil {
		replay.Frugal = func() bool { _, low := cfg.Hold.Low(); return low }
	}
	return &binlogCapture{stream: stream, replay: replay, start: start,
		apply: p.order.replay(binlog.NewApplier(p.writer, p.q), p.q)}, nil
}

func (binlogKind) setupRemedy() string {
	return "the user needs REPLICATION SLAVE (and BINLOG MONITOR or REPLICATION CLIENT)"
}

func (binlogKind) needsStart() bool { return true }

func (binlogKind) resumable(ctx context.Context, db *sql.DB, pos Position) (string, string, error) {
	if pos == "" {
		return "no binlog position was recorded", "", nil
	}
	p, err := parseBinlogPos(pos)
	if err != nil {
		return "", "", err
	}
	ok, err := binlog.StillAvailable(ctx, db, p)
	if err != nil || ok {
		return "", "", err
	}
	return fmt.Sprintf("the binlog it needs (%s, position %s) has been purged", p.Name, pos),
		"keep binlogs longer (binlog_expire_logs_seconds) next time", nil
}

func (binlogKind) install(context.Context, Config) error { return nil }
func (binlogKind) remove(context.Context, Config) error  { return nil }

func (binlogKind) leftovers(context.Context, *sql.DB, string, string) ([]string, error) {
	return nil, nil
}

func (binlogKind) now(ctx context.Context, db *sql.DB) (Position, error) {
	p, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		return "", err
	}
	return binlogPos(p), nil
}

func (binlogKind) behind(saved, server Position) (int64, string) {
	a, err1 := parseBinlogPos(saved)
	s, err2 := parseBinlogPos(server)
	switch {
	case err1 != nil || err2 != nil:
		return 0, ""
	case a.Name == s.Name && s.Pos >= a.Pos:
		return int64(s.Pos - a.Pos), fmt.Sprintf("%d bytes", s.Pos-a.Pos)
	}
	return 0, fmt.Sprintf("from %s (server at %s)", saved, server)
}

// binlogPos spells a binlog position as file:offset.
func binlogPos(p binlog.Position) Position {
	if p.Name == "" {
		return ""
	}
	return Position(p.Name + ":" + strconv.FormatUint(uint64(p.Pos), 10))
}

// parseBinlogPos reads what binlogPos wrote; empty is the zero position.
func parseBinlogPos(p Position) (binlog.Position, error) {
	if p == "" {
		return binlog.Position{}, nil
	}
	i := strings.LastIndexByte(string(p), ':')
	if i <= 0 {
		return binlog.Position{}, fmt.Errorf("binlog position %q: want file:offset", p)
	}
	n, err := strconv.ParseUint(string(p[i+1:]), 10, 32)
	if err != nil {
		return binlog.Position{}, fmt.Errorf("binlog position %q: %w", p, err)
	}
	return binlog.Position{Name: string(p[:i]), Pos: uint32(n)}, nil
}

// Run applies batch after batch through the ordering rule until ctx ends (returning nil) or a
// batch fails.
func (b *binlogCapture) Run(ctx context.Context) error {
	for {
		batch, err := b.replay.Next(ctx)
		if err != nil {
			return ignoreEnd(ctx, err)
		}
		var ops int
		if len(batch.Changes) > 0 {
			if d := faultsOf(ctx).ReplayDelay(); d > 0 && !sleep(ctx, d) {
				return nil
			}
			if ops, err = b.apply(ctx, batch.Changes); err != nil {
				return ignoreEnd(ctx, err)
			}
		}
		b.replay.Done(batch, ops)
	}
}

// ignoreEnd is err, or nil once ctx has ended (the error is then the end's).
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (b *binlogCapture) WaitFor(ctx context.Context, q dbconn.Execer, _ Held) (Position, error) {
	pos, err := binlog.CurrentPosition(ctx, q)
	if err != nil {
		return "", err
	}
	if err := b.replay.WaitFor(ctx, pos); err != nil {
		return binlogPos(pos), fmt.Errorf("replay did not reach %s: %w", binlogPos(pos), err)
	}
	return binlogPos(pos), nil
}

// Barrier reads the binlog's position on q, whose session holds the source read-locked (no change
// of the table lies past it), and keeps replay from writing any later change until lift
// (binlog.Replayer.Barrier).
func (b *binlogCapture) Barrier(ctx context.Context, q dbconn.Execer) (Position, func(), error) {
	pos, err := binlog.CurrentPosition(ctx, q)
	if err != nil {
		return "", nil, err
	}
	return binlogPos(pos), b.replay.Barrier(pos), nil
}

// Reached returns once replay has applied every change up to p, a Barrier's position.
func (b *binlogCapture) Reached(ctx context.Context, p Position) error {
	pos, err := parseBinlogPos(p)
	if err != nil {
		return err
	}
	if err := b.replay.WaitFor(ctx, pos); err != nil {
		return fmt.Errorf("replay did not reach %s: %w", p, err)
	}
	return nil
}

func (b *binlogCapture) LockWith(Held) []string    { return nil }
func (b *binlogCapture) CopyMode() table.WriteMode { return table.Replace }

// Hold and Release do nothing: replay writes only under the order, which a swap does not need
// (the source is locked, so replay has nothing left to write once it caught up).
func (b *binlogCapture) Hold()              {}
func (b *binlogCapture) Release()           {}
func (b *binlogCapture) ResumeAt() Position { return binlogPos(b.replay.ResumeAt()) }
func (b *binlogCapture) Start() Position    { return binlogPos(b.start) }
func (b *binlogCapture) Close()             { b.stream.Close() }

func (b *binlogCapture) Stats() Stats {
	s := b.replay.Stats()
	return Stats{Changes: s.Events, Applied: s.Applied, Position: binlogPos(s.AppliedAt), Behind: s.Behind, LagSeconds: s.LagSeconds}
}

var _ Capture = (*binlogCapture)(nil)
