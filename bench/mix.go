package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Mix is the relative weight of the built-in primary-key statements. The default is WebMix.
type Mix struct {
	Select int `json:"select"`
	Update int `json:"update"`
	Insert int `json:"insert"`
	Delete int `json:"delete"`
	// Source says where the mix came from, for the report: "default", "--mix", or the
	// performance_schema table it was derived from.
	Source string `json:"source"`
}

// DefaultMix is what the benchmark runs unless told otherwise: WebMix.
func DefaultMix() Mix {
	m := WebMix()
	m.Source = "default"
	return m
}

// ReadOnlyMix is what probes of a live table run: primary-key SELECTs only.
func ReadOnlyMix() Mix { return Mix{Select: 1, Source: "read-only probes"} }

// String is the S:U:I form, with :D when there are deletes.
func (m Mix) String() string {
	s := fmt.Sprintf("%d:%d:%d", m.Select, m.Update, m.Insert)
	if m.Delete > 0 {
		s += fmt.Sprintf(":%d", m.Delete)
	}
	return s
}

// Total is the sum of the weights.
func (m Mix) Total() int { return m.Select + m.Update + m.Insert + m.Delete }

// Writes reports whether the mix writes.
func (m Mix) Writes() bool { return m.Update+m.Insert+m.Delete > 0 }

// ParseMix reads "S:U:I" or "S:U:I:D" ("auto" is resolved by AutoMix, which needs a server).
func ParseMix(s string) (Mix, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 3 && len(parts) != 4 {
		return Mix{}, fmt.Errorf("mix %q: want SELECT:UPDATE:INSERT[:DELETE] weights, e.g. 16:7:1, or auto", s)
	}
	var w [4]int
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return Mix{}, fmt.Errorf("mix %q: weight %q is not a non-negative integer", s, p)
		}
		w[i] = n
	}
	return Mix{Select: w[0], Update: w[1], Insert: w[2], Delete: w[3], Source: "--mix"}, nil
}

// ErrNoIO means performance_schema has no I/O recorded for the table, so no mix can be derived.
var ErrNoIO = errors.New("no table I/O recorded in performance_schema")

// AutoMix derives the mix of a table from performance_schema.table_io_waits_summary_by_table,
// which counts row operations since the server started (or the table was last flushed).
// COUNT_FETCH counts rows read, not statements, and every primary-key UPDATE and DELETE also
// fetches its row; so SELECT weight = fetches - updates - deletes. A workload with scans therefore
// looks more read-heavy than its statement counts: the report says where the mix came from.
func AutoMix(ctx context.Context, db *sql.DB, schema, table string) (Mix, error) {
	var enabled string
	if err := db.QueryRowContext(ctx, "SELECT @@performance_schema").Scan(&enabled); err != nil {
		return Mix{}, fmt.Errorf("auto mix: read @@performance_schema: %w", err)
	}
	if enabled != "1" && !strings.EqualFold(enabled, "ON") {
		return Mix{}, fmt.Errorf("auto mix: performance_schema is off on this server; give --mix S:U:I")
	}
	var fetch, ins, upd, del sql.NullInt64
	err := db.QueryRowContext(ctx, `SELECT COUNT_FETCH, COUNT_INSERT, COUNT_UPDATE, COUNT_DELETE
		FROM performance_schema.table_io_waits_summary_by_table
		WHERE OBJECT_TYPE = 'TABLE' AND OBJECT_SCHEMA = ? AND OBJECT_NAME = ?`, schema, table).Scan(&fetch, &ins, &upd, &del)
	if errors.Is(err, sql.ErrNoRows) {
		return Mix{}, fmt.Errorf("auto mix for %s.%s: %w (table not instrumented or not used yet); give --mix S:U:I", schema, table, ErrNoIO)
	}
	if err != nil {
		return Mix{}, fmt.Errorf("auto mix for %s.%s: %w", schema, table, err)
	}
	sel := fetch.Int64 - upd.Int64 - del.Int64
	if sel < 0 {
		sel = 0
	}
	m, ok := mixFromCounts(sel, upd.Int64, ins.Int64, del.Int64)
	if !ok {
		return Mix{}, fmt.Errorf("auto mix for %s.%s: %w; give --mix S:U:I", schema, table, ErrNoIO)
	}
	m.Source = fmt.Sprintf("performance_schema.table_io_waits_summary_by_table (fetch=%d update=%d insert=%d delete=%d)",
		fetch.Int64, upd.Int64, ins.Int64, del.Int64)
	return m, nil
}

// mixScales are the per-N resolutions tried for an auto mix, smallest first: the first that keeps
// every observed proportion within mixTolerance gives readable weights (e.g. 16:7:1 for per 24).
var mixScales = []int64{24, 48, 100, 1000}

const mixTolerance = 0.05

// mixFromCounts scales operation counts to small integer weights with about the same proportions,
// and keeps any operation that happened at all (a rare INSERT still matters for MyISAM's locks).
func mixFromCounts(sel, upd, ins, del int64) (Mix, bool) {
	counts := [4]int64{sel, upd, ins, del}
	total := sel + upd + ins + del
	if total <= 0 {
		return Mix{}, false
	}
	var w [4]int
	for _, scale := range mixScales {
		good := true
		var sum int64
		for i, n := range counts {
			w[i] = 0
			if n > 0 {
				w[i] = max(1, int((n*scale+total/2)/total))
			}
			sum += int64(w[i])
		}
		for i, n := range counts {
			if n == 0 {
				continue
			}
			want := float64(n) / float64(total)
			got := float64(w[i]) / float64(sum)
			if got < want*(1-mixTolerance) || got > want*(1+mixTolerance) {
				good = false
			}
		}
		if good {
			break
		}
	}
	g := 0
	for _, v := range w {
		g = gcd(g, v)
	}
	for i := range w {
		w[i] /= g
	}
	return Mix{Select: w[0], Update: w[1], Insert: w[2], Delete: w[3]}, true
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
