package demo

import (
	"io"
	"log/slog"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Defaults sized so the whole tour takes a few minutes on a 2-core machine.
const (
	DefaultRows         = 1000000
	DefaultThreads      = 8
	DefaultRate         = 2000
	DefaultDatabase     = "enginemig_demo"
	DefaultGateDuration = 3 * time.Second
	DefaultGateSample   = 50000
	DefaultChart        = "enginemig-demo-bench.html"
	// afterCutover is how long the load keeps running on the converted table, so the check also
	// covers writes that went to InnoDB after the swap.
	afterCutover = 3 * time.Second
)

// DefaultGateThreads is the before-copy sweep.
var DefaultGateThreads = []int{1, 4, 16}

// reportQuery is the one report scan added to the benchmark mix: the realistic statement that makes
// MyISAM's table lock hurt (every writer waits for the scan). Without it a pure primary-key mix is
// often faster on MyISAM, and the gate would say so.
const reportQuery = "SELECT SUM(coins) FROM " + StateTable

// Config is one demo run.
type Config struct {
	// Out receives the walkthrough.
	Out io.Writer
	// Conn is an existing server to use; nil starts a private sandbox.
	Conn *dbconn.Config
	// Database is the scratch database on an existing server (default DefaultDatabase). It must
	// not exist or be empty; the demo drops it at the end unless Keep.
	Database string
	// Keep leaves the sandbox running (or the scratch database in place) afterwards.
	Keep bool
	// SandboxDir puts the sandbox there instead of a temporary directory.
	SandboxDir string
	Rows       int64
	// Threads and Rate shape the application load (see LoadConfig); Rate 0 is DefaultRate,
	// negative is unpaced.
	Threads int
	Rate    int
	// GateThreads, GateDuration and GateSample shape the before-copy benchmark sweep.
	GateThreads  []int
	GateDuration time.Duration
	GateSample   int
	// Chart is where the benchmark chart goes (.html, .svg or .png).
	Chart string
	// ChunkTime is passed to the copier (0: its default).
	ChunkTime time.Duration
	// Rollback also rolls the conversion back (losslessly, under load) after the cut-over.
	Rollback bool
	// SkipVerify skips apply's chunk-by-chunk verification (the demo's own check still runs).
	SkipVerify bool
	// Tool is enginemig's version, recorded in the plan.
	Tool string
	// Logger receives what is not part of the walkthrough: details at Debug, and at Warn what the
	// demo could not clean up. Nil discards. (Apply's and rollback's own events are told in the
	// walkthrough.)
	Logger *slog.Logger
}

func (c *Config) fill() {
	if c.Out == nil {
		c.Out = io.Discard
	}
	c.Logger = dbconn.Logger(c.Logger)
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.Rows <= 0 {
		c.Rows = DefaultRows
	}
	if c.Threads <= 0 {
		c.Threads = DefaultThreads
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if len(c.GateThreads) == 0 {
		c.GateThreads = DefaultGateThreads
	}
	if c.GateDuration <= 0 {
		c.GateDuration = DefaultGateDuration
	}
	if c.GateSample <= 0 {
		c.GateSample = DefaultGateSample
	}
	if c.Chart == "" {
		c.Chart = DefaultChart
	}
}
