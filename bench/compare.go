package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Mode says where a benchmark's statements go.
type Mode string

const (
	// ModeScratch benchmarks sample copies (MyISAM and InnoDB) of the table: the default, and the
	// only mode that writes without an explicit opt-in, because it writes only its own tables.
	ModeScratch Mode = "scratch"
	// ModeLive runs the (write) mix directly on the named tables: staging only, explicit flag.
	ModeLive Mode = "live"
	// ModeReadOnly runs SELECT probes on the named tables.
	ModeReadOnly Mode = "read-only"
)

// Options are one bench run.
type Options struct {
	Mode   Mode
	Schema string
	Table  string
	// Compare is a second table in Schema to benchmark side by side (live and read-only modes).
	Compare    string
	SampleRows int
	ScratchDB  string
	// Logger gets Debug details (the scratch copies) and a Warn when the scratch copies cannot be
	// dropped; nil discards. Per-step results go to Progress.
	Logger *slog.Logger `json:"-"`
	Config
}

// Run benchmarks according to opts and returns the report. In scratch mode the sample copies are
// dropped before it returns, also when the run fails or ctx is cancelled (interrupt).
func Run(ctx context.Context, db *sql.DB, opts Options) (rep Report, err error) {
	opts.Config.fill()
	if opts.Mode == ModeReadOnly {
		opts.ReadOnly = true
	}
	if err := opts.Config.Validate(); err != nil {
		return Report{}, err
	}
	rep = Report{Mode: string(opts.Mode), Schema: opts.Schema, Table: opts.Table, Mix: opts.Mix, Threads: opts.Threads,
		Seconds: opts.Duration.Seconds(), Warmup: opts.Warmup.Seconds()}
	var targets []Target
	switch opts.Mode {
	case ModeScratch:
		if opts.Compare != "" {
			return rep, errors.New("a second table is compared only in live or read-only mode; scratch mode compares MyISAM and InnoDB copies of one table")
		}
		sc, err := newScratchLogged(ctx, db, opts.ScratchDB, opts.Schema, opts.Table, opts.SampleRows, dbconn.Logger(opts.Logger))
		if err != nil {
			return rep, err
		}
		defer sc.dropLogged(ctx, &err)
		rep.Scratch, rep.Sample = sc.Schema, sc.Rows
		targets = sc.Targets(opts.Schema, opts.Table)
	case ModeLive, ModeReadOnly:
		targets = []Target{{Label: opts.Table, Schema: opts.Schema, Table: opts.Table}}
		if opts.Compare != "" {
			targets = append(targets, Target{Label: opts.Compare, Schema: opts.Schema, Table: opts.Compare, RefSchema: opts.Schema, RefTable: opts.Table})
		}
	default:
		return rep, fmt.Errorf("unknown bench mode %q", opts.Mode)
	}
	results, err := Sweep(ctx, db, targets, opts.Config)
	rep.Results = results
	rep.Capture = opts.Captured
	rep.compare()
	rep.noteCapture()
	return rep, err
}
