package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	capture "github.com/enginemig/enginemig/bench/workload"
)

// GateMix makes apply's gates replay the statements the application runs on each gated table
// instead of the primary-key mix (why: docs/bench.md, "The captured mix"). Exactly one source is
// used: Auto (statement digests since the counters were last reset: a gate does not wait for an
// observation window), LogFile (a slow or general log) or File (a mix saved by bench --save-mix,
// for one table).
// The capture is made once per table and reused by its later gates.
type GateMix struct {
	Auto    bool
	LogFile string
	File    string

	mu    sync.Mutex
	cache map[string]*capture.Capture
}

// For returns the captured mix of schema.table. A capture that finds nothing is an error: a gate
// never silently falls back to another mix.
func (g *GateMix) For(ctx context.Context, db *sql.DB, schema, table string) (*capture.Capture, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := schema + "." + table
	if c, ok := g.cache[key]; ok {
		return c, nil
	}
	var c *capture.Capture
	var err error
	switch {
	case g.File != "":
		if c, err = capture.Load(g.File); err == nil {
			err = c.Retarget(schema, table)
		}
	case g.LogFile != "":
		c, err = capture.FromLog(g.LogFile, schema, table)
	case g.Auto:
		c, err = capture.FromDigests(ctx, db, schema, table, 0)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("capture the statements on %s for the gate: %w", key, err)
	}
	if g.cache == nil {
		g.cache = map[string]*capture.Capture{}
	}
	g.cache[key] = c
	return c, nil
}

// withCapture fills Captured from CaptureMix for the gated table.
func (c GateConfig) withCapture(ctx context.Context, db *sql.DB, schema, table string) (GateConfig, error) {
	if c.CaptureMix == nil || c.Captured != nil {
		return c, nil
	}
	captured, err := c.CaptureMix.For(ctx, db, schema, table)
	if err != nil {
		return c, err
	}
	c.Captured = captured
	return c, nil
}
