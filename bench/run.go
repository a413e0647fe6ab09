package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Step is one thread count's measurement on one table.
type Step struct {
	Threads int     `json:"threads"`
	Seconds float64 `json:"seconds"`
	// Total is all foreground statements together: the numbers gates compare.
	Total Stats   `json:"total"`
	Ops   []Stats `json:"ops"`
	// Background are the report queries looping alongside (one client each).
	Background []Stats `json:"background,omitempty"`
}

// Op returns the named statement type's stats.
func (s Step) Op(name string) (Stats, bool) {
	for _, o := range s.Ops {
		if o.Name == name {
			return o, true
		}
	}
	return Stats{}, false
}

// maxConsecutiveErrors stops a thread whose every statement fails (a dropped connection, a
// missing table): counting a million instant errors would report a nonsense qps.
const maxConsecutiveErrors = 1000

// client is one connection with its statements prepared: prepared once per step, executed with
// one round trip each, like sysbench does, so the generator's own cost stays small.
type client struct {
	conn  *sql.Conn
	stmts []*sql.Stmt
	id    int64 // server connection id, to KILL QUERY a report still running at the end
}

func openClient(ctx context.Context, db *sql.DB, ops []op, skipBinlog bool) (*client, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open benchmark connection: %w", err)
	}
	c := &client{conn: conn}
	if skipBinlog {
		if _, err := conn.ExecContext(ctx, "SET SESSION sql_log_bin = 0"); err != nil {
			c.close()
			return nil, fmt.Errorf("skip binlog for scratch tables: %w", err)
		}
	}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&c.id); err != nil {
		c.close()
		return nil, fmt.Errorf("read connection id: %w", err)
	}
	for _, o := range ops {
		st, err := conn.PrepareContext(ctx, o.sql)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("prepare %s %q: %w", o.name, o.sql, err)
		}
		c.stmts = append(c.stmts, st)
	}
	return c, nil
}

func (c *client) close() {
	for _, s := range c.stmts {
		s.Close()
	}
	c.conn.Close()
}

// exec runs one statement and reads its whole result, as an application would.
func (c *client) exec(ctx context.Context, o *op, i int, args []any) error {
	if !o.rows {
		_, err := c.stmts[i].ExecContext(ctx, args...)
		return err
	}
	return readAll(c.stmts[i].QueryContext(ctx, args...))
}

// readAll reads a result to its end and closes it.
func readAll(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}

// tally is one goroutine's private counters: no sharing, no locks on the hot path.
type tally struct {
	hists    []*hdrhistogram.Histogram
	errors   []int64
	firstErr []string
	fatal    error
}

func newTally(n int) *tally {
	t := &tally{hists: make([]*hdrhistogram.Histogram, n), errors: make([]int64, n), firstErr: make([]string, n)}
	for i := range t.hists {
		t.hists[i] = newHist()
	}
	return t
}

func (t *tally) fail(i int, err error) {
	t.errors[i]++
	if t.firstErr[i] == "" {
		t.firstErr[i] = err.Error()
	}
}

type stepSpec struct {
	threads          int
	warmup, duration time.Duration
	seed             uint64
	skipBinlog       bool
}

// runStep runs the workload with n threads (one goroutine and one connection each) plus one
// client per background report, discards the warm-up, and measures for the duration.
func runStep(ctx context.Context, db *sql.DB, w *workload, s stepSpec) (Step, error) {
	var clients, reporters []*client
	defer func() {
		for _, c := range append(clients, reporters...) {
			c.close()
		}
	}()
	for i := 0; i < s.threads; i++ {
		c, err := openClient(ctx, db, w.ops, s.skipBinlog)
		if err != nil {
			return Step{}, err
		}
		clients = append(clients, c)
	}
	for i := range w.background {
		c, err := openClient(ctx, db, w.background[i:i+1], s.skipBinlog)
		if err != nil {
			return Step{}, err
		}
		reporters = append(reporters, c)
	}

	start := time.Now()
	from := start.Add(s.warmup)
	end := from.Add(s.duration)
	tallies := make([]*tally, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		tallies[i] = newTally(len(w.ops))
		wg.Add(1)
		go func(t *tally, c *client, seed uint64) {
			defer wg.Done()
			foreground(ctx, w, c, t, rand.New(rand.NewPCG(s.seed, seed)), from, end)
		}(tallies[i], c, uint64(i))
	}
	bgTallies := make([]*tally, len(reporters))
	var bgWG sync.WaitGroup
	for i, c := range reporters {
		bgTallies[i] = newTally(1)
		bgWG.Add(1)
		go func(t *tally, c *client, o *op, seed uint64) {
			defer bgWG.Done()
			background(ctx, c, o, t, rand.New(rand.NewPCG(s.seed, seed)), from, end)
		}(bgTallies[i], c, &w.background[i], uint64(1000+i))
	}
	wg.Wait()
	// A report scan can run far past the end of the step (and would hold MyISAM's lock into the
	// next one): interrupt it on the server rather than waiting or dropping the connection.
	killReports(db, reporters, &bgWG)
	bgWG.Wait()
	if err := ctx.Err(); err != nil {
		return Step{}, err
	}

	seconds := s.duration.Seconds()
	step := Step{Threads: s.threads, Seconds: seconds}
	total := newHist()
	var totalErr int64
	for i, o := range w.ops {
		h := newHist()
		var errs int64
		first := ""
		for _, t := range tallies {
			h.Merge(t.hists[i])
			errs += t.errors[i]
			if first == "" {
				first = t.firstErr[i]
			}
		}
		total.Merge(h)
		totalErr += errs
		step.Ops = append(step.Ops, statsOf(o.name, h, errs, first, seconds))
	}
	step.Total = statsOf("total", total, totalErr, "", seconds)
	for i, o := range w.background {
		t := bgTallies[i]
		step.Background = append(step.Background, statsOf(o.name, t.hists[0], t.errors[0], t.firstErr[0], seconds))
	}
	for _, t := range tallies {
		if t.fatal != nil {
			return step, t.fatal
		}
	}
	return step, nil
}

func foreground(ctx context.Context, w *workload, c *client, t *tally, r *rand.Rand, from, end time.Time) {
	args := make([]any, 0, 64)
	consecutive := 0
	// Statements run without cancellation: for a cancellable context the driver hands every
	// statement to a watcher goroutine and back, CPU the generator takes from the server it
	// measures (docs/bench/constants.md, "Measurements behind the code's constants"). Primary-key
	// statements are short, so the loop noticing ctx between statements is soon enough.
	qctx := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		i := w.pick(r)
		o := &w.ops[i]
		args = o.args(r, args[:0])
		began := time.Now()
		if !began.Before(end) {
			return
		}
		err := c.exec(qctx, o, i, args)
		done := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			consecutive++
			if !began.Before(from) && done.Before(end) {
				t.fail(i, err)
			}
			if consecutive >= maxConsecutiveErrors {
				t.fatal = fmt.Errorf("a benchmark thread stopped after %d consecutive errors: %w", consecutive, err)
				return
			}
			continue
		}
		consecutive = 0
		if !began.Before(from) && done.Before(end) {
			record(t.hists[i], done.Sub(began))
		}
	}
}

// background loops one report query; each run counts if it finished within the measured window.
func background(ctx context.Context, c *client, o *op, t *tally, r *rand.Rand, from, end time.Time) {
	args := make([]any, 0, 16)
	for ctx.Err() == nil && time.Now().Before(end) {
		args = o.args(r, args[:0])
		began := time.Now()
		err := c.exec(ctx, o, 0, args)
		done := time.Now()
		if !done.Before(end) {
			return // interrupted or finished after the window: not part of this step
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !began.Before(from) {
				t.fail(0, err)
			}
			// A failing report must not spin: it would become a CPU load of its own.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !began.Before(from) {
			record(t.hists[0], done.Sub(began))
		}
		if !pause(ctx, o.duty, done.Sub(began), end) {
			return
		}
	}
}

// pause keeps a duty-cycled background client idle for as long as its statement's run makes up
// the rest of its cycle (a report that ran 30% of the time in production pauses 2.3x its run
// time). It reports false when the pause would reach the end of the step or ctx ends.
func pause(ctx context.Context, duty float64, run time.Duration, end time.Time) bool {
	if duty <= 0 || duty >= 1 {
		return true
	}
	d := time.Duration(float64(run) * (1 - duty) / duty)
	if time.Until(end) < d {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// killReports interrupts report queries still running once the foreground threads are done.
func killReports(db *sql.DB, reporters []*client, wg *sync.WaitGroup) {
	if len(reporters) == 0 {
		return
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond):
		}
		for _, c := range reporters {
			// Error 1094 (unknown thread) or a query that just finished are both fine here.
			if _, err := db.ExecContext(ctx, table.KillQuery(c.id)); err != nil && errors.Is(err, context.DeadlineExceeded) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}
