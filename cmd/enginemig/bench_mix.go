package main

import (
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/bench/workload"
	"github.com/enginemig/enginemig/internal/db/outcome"
)

// mixOptions reads --mix, --observe, --from-log and --save-mix before connecting: a saved mix
// file is loaded here, auto and io are resolved once connected (resolveMix).
func mixOptions(c *cli.Context, o *bench.Options) error {
	m := c.String("mix")
	log := c.String("from-log")
	switch {
	case log != "" && c.IsSet("mix") && m != "auto":
		return fmt.Errorf("--from-log replays the log's statements: it cannot be combined with --mix %s", m)
	case c.IsSet("observe") && (m != "auto" || log != ""):
		return fmt.Errorf("--observe is the window of --mix auto (statement digests); it does not apply to --mix %s or --from-log", m)
	case c.Duration("observe") < 0:
		return fmt.Errorf("--observe must not be negative")
	}
	captured := log != "" || m == "auto"
	switch {
	case log != "" || m == "auto" || m == "io":
		// Resolved once connected (the log is read then too, so all capture errors come alike).
	case o.Mode == bench.ModeReadOnly && !c.IsSet("mix"):
		o.Mix = bench.ReadOnlyMix()
	default:
		mix, err := bench.ParseMix(m)
		if err == nil {
			o.Mix = mix
			if !c.IsSet("mix") {
				o.Mix.Source = "default"
			}
			break
		}
		if _, statErr := os.Stat(m); statErr != nil {
			return fmt.Errorf("%w (and no file %s exists to read a saved mix from)", err, m)
		}
		if o.Captured, err = workload.Load(m); err != nil {
			return err
		}
		if err := o.Captured.Retarget(o.Schema, o.Table); err != nil {
			return err
		}
		captured = true
	}
	if c.String("save-mix") != "" && !captured {
		return fmt.Errorf("--save-mix saves a captured mix: use it with --mix auto, --from-log or --mix FILE")
	}
	return nil
}

// resolveMix captures the statements for --mix auto and --from-log, derives --mix io, and
// saves the captured mix with --save-mix. A capture that finds nothing is an error that says
// what to do; it never falls back to a default mix silently.
func resolveMix(c *cli.Context, db *sql.DB, opts *bench.Options) error {
	var err error
	switch m, log := c.String("mix"), c.String("from-log"); {
	case log != "":
		opts.Captured, err = workload.FromLog(log, opts.Schema, opts.Table)
	case m == "auto":
		if w := c.Duration("observe"); w > 0 {
			fmt.Fprintf(os.Stderr, "bench: observing the statements on %s.%s for %s\n", opts.Schema, opts.Table, w)
		}
		opts.Captured, err = workload.FromDigests(c.Context, db, opts.Schema, opts.Table, c.Duration("observe"))
	case m == "io":
		if opts.Mix, err = bench.AutoMix(c.Context, db, opts.Schema, opts.Table); err != nil {
			return outcome.New(outcome.Usage, err, "")
		}
		if err := opts.Config.Validate(); err != nil {
			return outcome.New(outcome.Usage, err, "the table's observed mix writes; drop --read-only or give a SELECT-only --mix")
		}
		return nil
	}
	if err != nil {
		return outcome.New(outcome.Usage, fmt.Errorf("capture the statements on %s.%s: %w", opts.Schema, opts.Table, err), captureRemedy(err))
	}
	if path := c.String("save-mix"); path != "" && opts.Captured != nil {
		if err := opts.Captured.Save(path); err != nil {
			return err
		}
	}
	return nil
}

// captureRemedy is the documented fallback for each way a capture can find nothing.
func captureRemedy(err error) string {
	switch {
	case errors.Is(err, workload.ErrDigestsOff):
		return "turn the digests on, or replay a log with --from-log FILE (slow log with long_query_time=0, or the general log), or give --mix S:U:I"
	case errors.Is(err, workload.ErrNoStatements):
		return "the application did not use the table in that window: observe longer (--observe), capture where it runs (--from-log FILE, --mix FILE), or give --mix S:U:I"
	case errors.Is(err, workload.ErrNotALog):
		return "give a slow query log or a general query log (see docs/bench.md), or use --mix auto"
	}
	return "check the file, or use --mix auto or --mix S:U:I"
}

// gateMixOf reads apply's --gate-mix and --gate-from-log: primary-key weights, or where each
// gated table's captured statements come from.
func gateMixOf(c *cli.Context) (bench.Mix, *bench.GateMix, error) {
	m, log := c.String("gate-mix"), c.String("gate-from-log")
	if log != "" {
		if c.IsSet("gate-mix") {
			return bench.Mix{}, nil, fmt.Errorf("--gate-from-log replays the log's statements: it cannot be combined with --gate-mix")
		}
		if _, err := os.Stat(log); err != nil {
			return bench.Mix{}, nil, fmt.Errorf("--gate-from-log: %w", err)
		}
		return bench.Mix{}, &bench.GateMix{LogFile: log}, nil
	}
	switch {
	case !c.IsSet("gate-mix"):
		return bench.Mix{}, nil, nil // the gates' default mix
	case m == "auto":
		return bench.Mix{}, &bench.GateMix{Auto: true}, nil
	}
	mix, err := bench.ParseMix(m)
	if err == nil {
		return mix, nil, nil
	}
	if _, statErr := os.Stat(m); statErr != nil {
		return bench.Mix{}, nil, fmt.Errorf("--gate-mix: %w (and no file %s exists to read a saved mix from)", err, m)
	}
	if _, err := workload.Load(m); err != nil {
		return bench.Mix{}, nil, fmt.Errorf("--gate-mix: %w", err)
	}
	return bench.Mix{}, &bench.GateMix{File: m}, nil
}
