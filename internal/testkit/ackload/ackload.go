// Package ackload is a test helper: an application load that records every write the server
// acknowledged and can prove, at the end, that a table holds exactly those writes.
//
// Each writer owns a key range of its own (writer i owns ids [Base+i*Span, Base+(i+1)*Span)), so
// the expected content of its rows is known without any coordination: it is the last
// acknowledged write to each id. Writers run the production mix, bench.WebMix (16:7:1 primary-key
// SELECTs, UPDATEs and INSERTs), plus DELETEs and primary-key changes. Every SELECT is checked
// against the model too: an application that reads back an older version of a row it wrote
// has lost a write, even if the final table turns out right.
//
// A write that returns an error may or may not have been applied (the connection can die after the
// server committed it): its ids become "uncertain" and are excluded from the checks, and the writer
// stops using them. Tests that inject faults the application must not notice assert Errors() == 0.
package ackload

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enginemig/enginemig/bench"
	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Config sizes the load. Zero values get defaults.
type Config struct {
	Writers       int       // default 4
	RowsPerWriter int       // seeded rows per writer, default 1000
	Span          int64     // ids per writer, default 10,000,000
	Seed          uint64    // seeds values and operation choice
	Columns       [4]string // id, integer value, text, binary; default id, v, s, b
	// Pause between one writer's operations (0: none).
	Pause time.Duration
	// DeletesAndKeyChanges per 24 operations of bench.WebMix (each); default 1. Negative: none.
	DeletesAndKeyChanges int
	// OthersFrom, when above 0, leaves ids from it up to writers outside the load (a test's own
	// sessions, which check their rows themselves): Check skips them. It must lie above every
	// writer's range.
	OthersFrom int64
	// Via, when set, is the pool writer i sends its next statement to (a node of a cluster, which
	// the test may change while the load runs), and done, when not nil, is called once that
	// statement has ended; nil sends everything to Create's pool.
	Via func(writer int) (db *sql.DB, done func())
}

// webMix is the share of the load that imitates the application.
var webMix = bench.WebMix()

type row struct {
	v int64
	s sql.NullString
	b []byte
}

// Load is a running or finished application load on one table.
type Load struct {
	db  *sql.DB
	qt  string // quoted table
	cfg Config
	q   [4]string
	ws  []*writer
}

type writer struct {
	l         *Load
	i         int
	lo, hi    int64 // owned [lo, hi)
	next      int64
	r         *rand.Rand
	live      []int64
	model     map[int64]row // acknowledged content of live ids
	uncertain map[int64]bool
	acked     atomic.Int64
	reads     atomic.Int64
	longest   atomic.Int64 // the longest write, in nanoseconds
	errs      []string
	stale     []string
	mu        sync.Mutex // guards errs and stale for reporting while running
}

func (c *Config) defaults() {
	if c.Writers == 0 {
		c.Writers = 4
	}
	if c.RowsPerWriter == 0 {
		c.RowsPerWriter = 1000
	}
	if c.Span == 0 {
		c.Span = 10_000_000
	}
	if c.Columns[0] == "" {
		c.Columns = [4]string{"id", "v", "s", "b"}
	}
	if c.DeletesAndKeyChanges == 0 {
		c.DeletesAndKeyChanges = 1
	}
	if c.DeletesAndKeyChanges < 0 {
		c.DeletesAndKeyChanges = 0
	}
}

// DDL returns the MyISAM table definition the load writes to.
func DDL(qualified string, cols [4]string) string {
	if cols[0] == "" {
		cols = [4]string{"id", "v", "s", "b"}
	}
	q := func(i int) string { return dbconn.QuoteIdent(cols[i]) }
	return fmt.Sprintf("CREATE TABLE %s (%s BIGINT NOT NULL, %s BIGINT NOT NULL, %s VARCHAR(64) CHARACTER SET utf8mb4 NULL, "+
		"%s VARBINARY(24) NULL, PRIMARY KEY (%s), KEY %s (%s)) ENGINE=MyISAM DEFAULT CHARSET=latin1",
		qualified, q(0), q(1), q(2), q(3), q(0), dbconn.QuoteIdent("by "+cols[1]), q(1))
}

// Create makes the table (MyISAM) and seeds every writer's rows.
func Create(ctx context.Context, db *sql.DB, schema, table string, cfg Config) (*Load, error) {
	cfg.defaults()
	if cfg.OthersFrom > 0 && cfg.OthersFrom < 1+int64(cfg.Writers)*cfg.Span {
		return nil, fmt.Errorf("ackload: OthersFrom %d lies inside the writers' ids (up to %d)", cfg.OthersFrom, int64(cfg.Writers)*cfg.Span)
	}
	l := &Load{db: db, qt: dbconn.QualifiedName(schema, table), cfg: cfg}
	for i, c := range cfg.Columns {
		l.q[i] = dbconn.QuoteIdent(c)
	}
	if _, err := db.ExecContext(ctx, DDL(l.qt, cfg.Columns)); err != nil {
		return nil, fmt.Errorf("ackload: create: %w", err)
	}
	seedRand := rand.New(rand.NewPCG(cfg.Seed, 0))
	for i := 0; i < cfg.Writers; i++ {
		lo := 1 + int64(i)*cfg.Span
		w := &writer{l: l, i: i, lo: lo, hi: lo + cfg.Span, next: lo, r: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1)),
			model: map[int64]row{}, uncertain: map[int64]bool{}}
		l.ws = append(l.ws, w)
		const batch = 500
		for done := 0; done < cfg.RowsPerWriter; done += batch {
			var vals []string
			var args []any
			for j := 0; j < batch && done+j < cfg.RowsPerWriter; j++ {
				id := w.next
				w.next++
				rw := randomRow(seedRand)
				vals = append(vals, "(?,?,?,?)")
				args = append(args, id, rw.v, rw.s, rw.b)
				w.model[id] = rw
				w.live = append(w.live, id)
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO "+l.qt+" ("+strings.Join(l.q[:], ",")+") VALUES "+strings.Join(vals, ","), args...); err != nil {
				return nil, fmt.Errorf("ackload: seed: %w", err)
			}
		}
	}
	return l, nil
}

var words = []string{"héllo", "日本語", "emoji 🎮", `quote ' "dq" \back`, "", "plain", "Zürich", "ñ", "`tick`"}

func randomRow(r *rand.Rand) row {
	rw := row{v: r.Int64N(1<<40) - 1<<39}
	if r.IntN(6) != 0 {
		rw.s = sql.NullString{String: words[r.IntN(len(words))] + fmt.Sprint(r.IntN(100000)), Valid: true}
	}
	if r.IntN(6) != 0 {
		rw.b = make([]byte, r.IntN(24))
		for i := range rw.b {
			rw.b[i] = byte(r.IntN(256))
		}
	}
	return rw
}

// Start runs every writer in its own goroutine until the returned stop is called; stop waits
// until each writer's last statement has been acknowledged or failed.
func (l *Load) Start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range l.ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				w.step()
				if l.cfg.Pause > 0 {
					time.Sleep(l.cfg.Pause)
				}
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// exec runs one write; an error makes ids uncertain.
func (w *writer) exec(ids []int64, q string, args ...any) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, done := w.db()
	began := time.Now()
	_, err := db.ExecContext(ctx, q, args...)
	took := time.Since(began)
	done()
	for prev := w.longest.Load(); int64(took) > prev && !w.longest.CompareAndSwap(prev, int64(took)); prev = w.longest.Load() {
	}
	if err != nil {
		w.mu.Lock()
		w.errs = append(w.errs, fmt.Sprintf("%s at %s: %v", strings.Fields(q)[0], time.Now().Format("15:04:05.000"), err))
		w.mu.Unlock()
		for _, id := range ids {
			w.forget(id)
			w.uncertain[id] = true
		}
		time.Sleep(20 * time.Millisecond) // a failing server: do not spin
		return false
	}
	w.acked.Add(1)
	return true
}

func (w *writer) db() (*sql.DB, func()) {
	if w.l.cfg.Via != nil {
		db, done := w.l.cfg.Via(w.i)
		if done == nil {
			done = func() {}
		}
		return db, done
	}
	return w.l.db, func() {}
}

func (w *writer) forget(id int64) {
	delete(w.model, id)
	for i, x := range w.live {
		if x == id {
			w.live[i] = w.live[len(w.live)-1]
			w.live = w.live[:len(w.live)-1]
			return
		}
	}
}

func (w *writer) pick() (int64, bool) {
	if len(w.live) == 0 {
		return 0, false
	}
	return w.live[w.r.IntN(len(w.live))], true
}

// step runs one operation. The 16:7:1 choice is bench.WebMix's; the DELETEs and key changes
// are this load's own, drawn from the values past the mix's total so the mix keeps its shape.
// The operation is drawn before the id, always in this order: a Seed replays the same sequence.
func (w *writer) step() {
	extra := w.l.cfg.DeletesAndKeyChanges
	n := w.r.IntN(webMix.Total() + 2*extra)
	id, ok := w.pick()
	if n >= webMix.Total() {
		if n < webMix.Total()+extra {
			w.delete(id, ok)
		} else {
			w.changeKey(id, ok)
		}
		return
	}
	switch webMix.Op(n) {
	case bench.OpSelect:
		w.read(id, ok)
	case bench.OpUpdate:
		w.update(id, ok)
	case bench.OpInsert:
		w.insert()
	}
}

// read is a primary-key read, checked against the acknowledged state.
func (w *writer) read(id int64, ok bool) {
	if !ok {
		return
	}
	l, q := w.l, w.l.q
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got row
	db, done := w.db()
	defer done()
	err := db.QueryRowContext(ctx, "SELECT "+q[1]+","+q[2]+","+q[3]+" FROM "+l.qt+" WHERE "+q[0]+"=?", id).Scan(&got.v, &got.s, &got.b)
	w.reads.Add(1)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		w.mu.Lock()
		w.errs = append(w.errs, fmt.Sprintf("SELECT at %s: %v", time.Now().Format("15:04:05.000"), err))
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return
	}
	want := w.model[id]
	if errors.Is(err, sql.ErrNoRows) {
		w.mu.Lock()
		w.stale = append(w.stale, fmt.Sprintf("read of id %d found no row; acknowledged %s", id, want))
		w.mu.Unlock()
	} else if !got.equal(want) {
		w.mu.Lock()
		w.stale = append(w.stale, fmt.Sprintf("read of id %d returned %s; acknowledged %s", id, got, want))
		w.mu.Unlock()
	}
}

// update rewrites a row: one column in a third of the updates, all three otherwise.
func (w *writer) update(id int64, ok bool) {
	if !ok {
		return
	}
	l, q := w.l, w.l.q
	rw := randomRow(w.r)
	if w.r.IntN(3) == 0 { // a one-column update
		rw.s, rw.b = w.model[id].s, w.model[id].b
		if w.exec([]int64{id}, "UPDATE "+l.qt+" SET "+q[1]+"=? WHERE "+q[0]+"=?", rw.v, id) {
			w.model[id] = rw
		}
		return
	}
	if w.exec([]int64{id}, "UPDATE "+l.qt+" SET "+q[1]+"=?,"+q[2]+"=?,"+q[3]+"=? WHERE "+q[0]+"=?", rw.v, rw.s, rw.b, id) {
		w.model[id] = rw
	}
}

// insert adds a row at the writer's next free id.
func (w *writer) insert() {
	if w.next >= w.hi {
		return
	}
	l, q := w.l, w.l.q
	nid := w.next
	w.next++
	rw := randomRow(w.r)
	if w.exec([]int64{nid}, "INSERT INTO "+l.qt+" ("+strings.Join(q[:], ",")+") VALUES (?,?,?,?)", nid, rw.v, rw.s, rw.b) {
		w.model[nid] = rw
		w.live = append(w.live, nid)
	}
}

func (w *writer) delete(id int64, ok bool) {
	if !ok {
		return
	}
	if w.exec([]int64{id}, "DELETE FROM "+w.l.qt+" WHERE "+w.l.q[0]+"=?", id) {
		w.forget(id)
	}
}

// changeKey moves a row to the writer's next free id (a primary-key UPDATE).
func (w *writer) changeKey(id int64, ok bool) {
	if !ok || w.next >= w.hi {
		return
	}
	l, q := w.l, w.l.q
	nid := w.next
	w.next++
	if w.exec([]int64{id, nid}, "UPDATE "+l.qt+" SET "+q[0]+"=? WHERE "+q[0]+"=?", nid, id) {
		rw := w.model[id]
		w.forget(id)
		w.model[nid] = rw
		w.live = append(w.live, nid)
	}
}

func (r row) equal(o row) bool {
	return r.v == o.v && r.s == o.s && string(r.b) == string(o.b) && (r.b == nil) == (o.b == nil)
}

func (r row) String() string {
	s := "NULL"
	if r.s.Valid {
		s = fmt.Sprintf("%q", r.s.String)
	}
	b := "NULL"
	if r.b != nil {
		b = fmt.Sprintf("%x", r.b)
	}
	return fmt.Sprintf("(v=%d s=%s b=%s)", r.v, s, b)
}

// Stats counts what the load did.
type Stats struct {
	Acked     int64 // acknowledged writes
	Reads     int64 // primary-key reads checked against the model
	Errors    int   // statements that failed (the application saw an error)
	Stale     int   // reads that returned something else than the last acknowledged write
	Uncertain int   // ids excluded from the checks because a write to them failed
	// LongestWrite is the longest any write took, from sending it to its answer.
	LongestWrite time.Duration
}

// Stats may only be called after stop.
func (l *Load) Stats() Stats {
	var s Stats
	for _, w := range l.ws {
		s.Acked += w.acked.Load()
		s.Reads += w.reads.Load()
		s.Errors += len(w.errs)
		s.Stale += len(w.stale)
		s.Uncertain += len(w.uncertain)
		s.LongestWrite = max(s.LongestWrite, time.Duration(w.longest.Load()))
	}
	return s
}

// Problems lists up to n application-visible problems (errors and stale reads); call after stop.
func (l *Load) Problems(n int) []string {
	var out []string
	for _, w := range l.ws {
		out = append(out, w.stale...)
		out = append(out, w.errs...)
	}
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// Check compares table (in schema) with the acknowledged state, after stop. It returns how many
// rows it compared and up to 10 differences: a missing row, a row with other content, or a row
// that should not exist (deleted, moved, or never inserted). Ids made uncertain by a failed write
// are skipped.
func (l *Load) Check(ctx context.Context, db *sql.DB, schema, table string) (checked int, diffs []string, err error) {
	q := l.q
	rows, err := db.QueryContext(ctx, "SELECT "+strings.Join(q[:], ",")+" FROM "+dbconn.QualifiedName(schema, table)+" ORDER BY "+q[0])
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	owner := func(id int64) *writer {
		i := (id - 1) / l.cfg.Span
		if id < 1 || i >= int64(len(l.ws)) {
			return nil
		}
		return l.ws[i]
	}
	seen := map[int64]bool{}
	add := func(s string) {
		if len(diffs) < 10 {
			diffs = append(diffs, s)
		}
	}
	for rows.Next() {
		var id int64
		var got row
		if err := rows.Scan(&id, &got.v, &got.s, &got.b); err != nil {
			return checked, diffs, err
		}
		if l.cfg.OthersFrom > 0 && id >= l.cfg.OthersFrom {
			continue
		}
		w := owner(id)
		if w == nil {
			add(fmt.Sprintf("id %d: a row nobody wrote %s", id, got))
			continue
		}
		if w.uncertain[id] {
			continue
		}
		seen[id] = true
		want, ok := w.model[id]
		switch {
		case !ok:
			add(fmt.Sprintf("id %d: present %s but was deleted, moved or never inserted", id, got))
		case !got.equal(want):
			add(fmt.Sprintf("id %d: has %s, last acknowledged write %s", id, got, want))
		default:
			checked++
		}
	}
	if err := rows.Err(); err != nil {
		return checked, diffs, err
	}
	var missing []int64
	for _, w := range l.ws {
		for id := range w.model {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	for _, id := range missing {
		add(fmt.Sprintf("id %d: missing; last acknowledged write %s", id, owner(id).model[id]))
	}
	if len(missing) > 0 && len(diffs) == 10 {
		diffs = append(diffs, fmt.Sprintf("(%d missing rows in all)", len(missing)))
	}
	return checked, diffs, nil
}
