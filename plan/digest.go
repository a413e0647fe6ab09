package plan

import (
	"context"

	"github.com/enginemig/enginemig/internal/workload"
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
		s.Digests, s.DigestsAvailable = ds, true
	}
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
