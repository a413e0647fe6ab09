package plan

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/enginemig/enginemig/bench/workload"
)

// Digest is one normalised statement shape from performance_schema, with how often it ran since
// the server started (or the summary was truncated). The workload package reads and parses them,
// for plan and for bench's captured mix alike.
type Digest = workload.Statement

// loadDigests reads the statement digest summary. Failures (no SELECT on performance_schema, the
// consumer disabled) leave DigestsAvailable false: the application checks then fall back to
// global status, and say so.
func (s *ServerInfo) loadDigests(ctx context.Context, q Querier) {
	ds, err := workload.ReadDigests(ctx, q)
	if err == nil {
		s.Digests, s.DigestsAvailable, s.reads = ds, true, &digestReads{}
	}
}

// readsOf are the digests of SELECTs that read schema.name, as their own statements or in a join
// (enginemig's own reads left out).
func (s *ServerInfo) readsOf(schema, name string) []Digest {
	r := s.reads
	if r == nil { // a ServerInfo made without loadDigests (tests): parsed for this call
		r = &digestReads{}
	}
	return r.of(s.Digests, schema, name)
}

// digestReads indexes the SELECTs among one reading of the digests by the tables they read,
// parsing each digest once: several checks of every table ask for the table's reads, and parsing
// every digest again for each of them was most of enginemig's CPU in a whole-database apply (a
// wiki's 58 tables: about 20 ms a table, on the cores the application's requests need).
type digestReads struct {
	once sync.Once
	by   map[string][]Digest // readKey of each table read
}

func readKey(schema, name string) string { return schema + "\x00" + strings.ToLower(name) }

func (r *digestReads) of(ds []Digest, schema, name string) []Digest {
	r.once.Do(func() {
		r.by = map[string][]Digest{}
		for _, d := range ds {
			if workload.Kind(d.Text) != "SELECT" || workload.OwnRead(d.Text) {
				continue
			}
			seen := map[string]bool{}
			for _, t := range workload.Tables(d.Text, d.Schema) {
				if k := readKey(t.Schema, t.Name); !seen[k] {
					seen[k] = true
					r.by[k] = append(r.by[k], d)
				}
			}
		}
	})
	return r.by[readKey(schema, name)]
}

// digestsMaxAge is how long a whole run's tables share one reading of the digests (Catalog):
// a run of small tables reads them once, a run of hours sees a statement that first ran during it
// within a minute.
const digestsMaxAge = time.Minute

// sharedDigests is the Catalog's reading of the digests, for every table's ServerInfo of a run.
type sharedDigests struct {
	on      bool // ShareDigests was called (before the run's tables start)
	mu      sync.Mutex
	at      time.Time  // when reading was read; zero before the first
	reading ServerInfo // its Digests, DigestsAvailable and reads
}

// ShareDigests has every table of the run that checks against this catalog (CheckServer) take the
// statement digests from one reading, renewed once it is digestsMaxAge old, instead of reading
// performance_schema's summary (every statement shape the server has seen) for each table. Call
// it before the tables' checks start.
func (c *Catalog) ShareDigests() { c.digests.on = true }

// fillDigests gives s the catalog's reading of the digests, reading them when it has none younger
// than digestsMaxAge; false when the catalog does not share them.
func (c *Catalog) fillDigests(ctx context.Context, q Querier, s *ServerInfo) bool {
	if c == nil {
		return false
	}
	d := &c.digests
	if !d.on {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at.IsZero() || time.Since(d.at) > digestsMaxAge {
		d.reading = ServerInfo{}
		d.reading.loadDigests(ctx, q)
		d.at = time.Now()
	}
	s.Digests, s.DigestsAvailable, s.reads = d.reading.Digests, d.reading.DigestsAvailable, d.reading.reads
	return true
}

// digestsFor returns the digests for which match reports true, and their total count.
func digestsFor(ds []Digest, match func(Digest) bool) (n int, count int64) {
	for _, d := range ds {
		if match(d) {
			n++
			count += d.Count
		}
	}
	return n, count
}
