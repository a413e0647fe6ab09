package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration"
	"github.com/enginemig/enginemig/pace/window"
)

// windowFlags are apply's time windows: when the copy may run and when the swap may start.
func windowFlags() []cli.Flag {
	const cat = "Windows"
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "copy-window", Category: cat, Usage: "copy rows only inside this span, e.g. \"Mon-Fri 00:30-06:00\" (repeatable); outside every span the copy pauses (throttle reason window) and replay keeps the shadow current"},
		&cli.StringSliceFlag{Name: "cutover-window", Category: cat, Usage: "start the swap only inside this span, e.g. \"Sat 02:00-04:00\" (repeatable); a finished shadow is held, kept current, until it opens, and attempts stop when it closes to go on at the next opening"},
		&cli.StringFlag{Name: "window-zone", Value: "local", Category: cat, Usage: "time zone of the windows: local (this machine's), server (the server's offset from UTC), UTC, or a zone name such as Europe/Berlin"},
	}
}

// windowZone is where the windows' clock times are read.
type windowZone struct {
	loc  *time.Location
	name string
}

// zoneOf reads --window-zone. server needs db; without it (the check before connecting) UTC
// stands in, which parses the same.
func zoneOf(ctx context.Context, c *cli.Context, db *sql.DB) (windowZone, error) {
	name := c.String("window-zone")
	switch strings.ToLower(name) {
	case "local":
		return windowZone{time.Local, "local"}, nil
	case "utc":
		return windowZone{time.UTC, "UTC"}, nil
	case "server":
		if db == nil {
			return windowZone{time.UTC, "server"}, nil
		}
		return serverZone(ctx, db)
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" {
		return windowZone{}, outcome.New(outcome.Usage, fmt.Errorf("--window-zone %q: not a time zone", name),
			"give local, server, UTC or a zone name such as Europe/Berlin")
	}
	return windowZone{loc, name}, nil
}

// serverZone is the server's offset from UTC now, to the minute, as a fixed zone named server.
func serverZone(ctx context.Context, db *sql.DB) (windowZone, error) {
	var secs int64
	if err := db.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), NOW())").Scan(&secs); err != nil {
		return windowZone{}, fmt.Errorf("--window-zone server: read the server's offset from UTC: %w", err)
	}
	off := (time.Duration(secs) * time.Second).Round(time.Minute)
	return windowZone{time.FixedZone("server", int(off/time.Second)), "server"}, nil
}

// windowOptions reads --copy-window and --cutover-window in zone into opts; a bad span is a
// usage error naming the flag.
func windowOptions(c *cli.Context, zone windowZone, opts *migration.Options) error {
	for _, f := range []struct {
		flag string
		into **window.Schedule
	}{{"copy-window", &opts.CopyWindow}, {"cutover-window", &opts.CutoverWindow}} {
		s, err := window.Parse(c.StringSlice(f.flag), zone.loc, zone.name)
		if err != nil {
			return outcome.New(outcome.Usage, fmt.Errorf("--%s: %w", f.flag, err), "e.g. --"+f.flag+" \"Mon-Fri 00:30-06:00\"; times are in --window-zone ("+zone.name+")")
		}
		*f.into = s
	}
	return nil
}

// checkWindows checks the window flags before connecting: bad input changes nothing.
func checkWindows(c *cli.Context) error {
	zone, err := zoneOf(c.Context, c, nil)
	if err != nil {
		return err
	}
	return windowOptions(c, zone, &migration.Options{})
}
