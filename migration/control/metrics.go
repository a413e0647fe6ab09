package control

import (
	"context"
	"errors"
	"fmt"
	"github.com/enginemig/enginemig/pace/diskspace"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics serves a running apply's Status as Prometheus metrics, read at each scrape from the
// same source as `control status` (one truth for the socket, the dashboard and the log).
type Metrics struct {
	srv  *http.Server
	addr string
}

// Addr is the address the endpoint listens on (useful with port 0).
func (m *Metrics) Addr() string { return m.addr }

// Close stops the endpoint.
func (m *Metrics) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return m.srv.Shutdown(ctx)
}

// ServeMetrics listens on addr (host:port) and serves /metrics from status.
func ServeMetrics(addr string, status func() Status) (*Metrics, error) {
	return ServeBoard(addr, func() []Status { return []Status{status()} })
}

// ServeBoard serves the metrics of several migrations (apply --plan --parallel), each series
// labelled with its table.
func ServeBoard(addr string, statuses func() []Status) (*Metrics, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{statuses: statuses})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &Metrics{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr().String()}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the apply goes on without its dashboard; nothing to report to
		}
	}()
	return m, nil
}

// descs are the metrics, each labelled with the table's schema and name (plus the named extra).
var descs = map[string]*prometheus.Desc{}

func init() {
	for _, m := range []struct{ name, help, extra string }{
		{"stage", "1 for the migration's current stage (label stage)", "stage"},
		{"rows_total", "the table's row count as estimated by the server", ""},
		{"rows_copied", "rows copied into the shadow", ""},
		{"rows_verified", "rows compared by verification", ""},
		{"copy_chunk_rows", "the copy's current chunk size in rows", ""},
		{"stage_rows_per_second", "the current stage's own rate (copy or verify)", ""},
		{"stage_eta_seconds", "the rest of the current stage (copy or verify) at its own rate (0: unknown)", ""},
		{"run_eta_seconds", "the rest of copy and verification together, verification at the cost sampled during the copy (0: unknown, or none left)", ""},
		{"capture_changes", "changes of the table captured: binlog row changes, or keys noted by trigger capture", ""},
		{"capture_catching_up", "1 while a backlog was waiting at the capture's last batch or sync", ""},
		{"capture_lag_seconds", "age of the oldest change captured but not yet applied (0 while the capture waits for changes, or cannot tell)", ""},
		{"capture_lag_bytes", "binlog bytes between the capture's applied position and the server's (binlog capture, same file only)", ""},
		{"lock_waits_total", "lock waits of the migration's statements seen (another session held the table; cut-over attempts whose lock was not granted count too)", ""},
		{"blocked", "1 while the migration waits (label on: lock, long_queries, snapshots, throttle, postponed, disk, cutover, window)", "on"},
		{"blocked_seconds", "how long the current wait has lasted (label on)", "on"},
		{"blocked_by", "1 for each session holding what the migration waits on (labels on, connection, user)", "on,connection,user"},
		{"cutover_attempts_total", "cut-over attempts so far", ""},
		{"cutover_lock_seconds", "how long the successful cut-over held the table locked", ""},
		{"throttled", "1 while the copy waits (label reason)", "reason"},
		{"paused", "1 while an operator paused the copy", ""},
		{"replica_lag_seconds", "each watched replica's lag (label replica)", "replica"},
		{"disk_free_bytes", "free space on each file system the server writes the conversion to (labels mount, roles: datadir, binlog, tmpdir)", "mount,roles"},
		{"disk_reserve_bytes", "the free space apply keeps on each of them (--disk-reserve); under it the copy waits", "mount,roles"},
		{"disk_low", "1 while free space is under the reserve on one of them", ""},
		{"pace_level", "the automatic pace's level (0: the copy rests most; top: two workers, no rest)", ""},
		{"pace_latency_baseline_seconds", "the probe's p99 before the copy (a primary-key read of the table)", ""},
		{"pace_latency_target_seconds", "the most the probe's p99 may be during copy and verification (0: no target)", ""},
		{"pace_latency_p99_seconds", "the probe's p99 over its last second of reads", ""},
		{"pace_chunk_lock_bound_seconds", "the longest a chunk may hold the table by the latency target (0: none)", ""},
		{"elapsed_seconds", "time since the migration started", ""},
	} {
		labels := []string{"schema", "table"}
		if m.extra != "" {
			labels = append(labels, strings.Split(m.extra, ",")...)
		}
		descs[m.name] = prometheus.NewDesc("enginemig_"+m.name, m.help, labels, nil)
	}
}

type collector struct{ statuses func() []Status }

// Board holds the running migrations' status functions, for one endpoint over several.
type Board struct {
	mu   sync.Mutex
	next int
	m    map[int]func() Status
}

// Add puts a migration's status on the board until remove is called.
func (b *Board) Add(status func() Status) (remove func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[int]func() Status{}
	}
	b.next++
	id := b.next
	b.m[id] = status
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.m, id)
	}
}

// Statuses reads every migration on the board.
func (b *Board) Statuses() []Status {
	b.mu.Lock()
	fns := make([]func() Status, 0, len(b.m))
	for _, f := range b.m {
		fns = append(fns, f)
	}
	b.mu.Unlock()
	out := make([]Status, 0, len(fns))
	for _, f := range fns {
		out = append(out, f())
	}
	return out
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.statuses() {
		collect(ch, s)
	}
}

func collect(ch chan<- prometheus.Metric, s Status) {
	gauge := func(name string, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(descs[name], prometheus.GaugeValue, v, append([]string{s.Schema, s.Table}, extra...)...)
	}
	gauge("stage", 1, s.Stage)
	gauge("rows_total", float64(s.RowsTotal))
	gauge("rows_copied", float64(s.RowsCopied))
	gauge("rows_verified", float64(s.RowsVerified))
	gauge("copy_chunk_rows", float64(s.ChunkSize))
	gauge("stage_rows_per_second", s.StageRate)
	gauge("stage_eta_seconds", s.StageETA.Seconds())
	gauge("run_eta_seconds", s.RunETA.Seconds())
	gauge("capture_changes", float64(s.CaptureChanges))
	gauge("capture_catching_up", b2f(s.CaptureCatchingUp))
	gauge("elapsed_seconds", s.Elapsed.Seconds())
	gauge("capture_lag_seconds", s.CaptureLagSeconds)
	gauge("capture_lag_bytes", float64(s.CaptureBehindBytes))
	counter := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(descs[name], prometheus.CounterValue, v, s.Schema, s.Table)
	}
	counter("lock_waits_total", float64(s.LockWaits))
	counter("cutover_attempts_total", float64(s.CutoverAttempts))
	gauge("cutover_lock_seconds", s.CutoverLockHeld.Seconds())
	// Two waits of one kind (two statements waiting for locks) are one series: the longest.
	longest := map[string]float64{}
	holders := map[[3]string]bool{}
	for _, w := range s.Waiting {
		longest[w.Kind] = max(longest[w.Kind], w.Waited.Seconds())
		for _, b := range w.Blockers {
			holders[[3]string{w.Kind, strconv.FormatInt(b.ID, 10), b.User}] = true
		}
	}
	for kind, secs := range longest {
		gauge("blocked", 1, kind)
		gauge("blocked_seconds", secs, kind)
	}
	for h := range holders {
		gauge("blocked_by", 1, h[0], h[1], h[2])
	}
	collectDisk(gauge, s.Disk)
	if p := s.Pace; p != nil {
		gauge("pace_level", float64(p.Level))
		gauge("pace_latency_baseline_seconds", p.LatencyBaseline)
		gauge("pace_latency_target_seconds", p.LatencyTarget)
		gauge("pace_latency_p99_seconds", p.LatencyP99)
		gauge("pace_chunk_lock_bound_seconds", p.ChunkLockBound)
	}
	if t := s.Throttle; t != nil {
		gauge("throttled", b2f(t.Throttled), t.Reason)
		gauge("paused", b2f(t.Paused))
		for _, r := range t.Replicas {
			gauge("replica_lag_seconds", r.LagSeconds, r.Name)
		}
	}
}

func collectDisk(gauge func(string, float64, ...string), d *diskspace.Status) {
	if d == nil {
		return
	}
	gauge("disk_low", b2f(d.Low))
	for _, f := range d.FS {
		roles := strings.Join(f.Roles, "+")
		gauge("disk_free_bytes", float64(f.Free), f.Mount, roles)
		gauge("disk_reserve_bytes", float64(f.Reserve), f.Mount, roles)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
