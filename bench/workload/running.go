package workload

import (
	"context"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// Who runs a long statement matters for replaying it: a report that the application's request
// threads run now and then scales with their number, but one that a dedicated client (a cron job,
// a dashboard) loops keeps its own pace however many request threads there are. Digests cannot
// tell the two apart, so during an observation window the process list is sampled: a connection
// that is seen running the same statement in most samples is a dedicated client of it.

// sampleEvery is how often the process list is read during an observation window.
const sampleEvery = 100 * time.Millisecond

// dedicatedShare is the share of samples in which a connection must be running a statement to be
// its dedicated client.
const dedicatedShare = 0.5

// runningSamples counts, per connection, in how many process-list samples it ran each statement
// (by canonical text).
type runningSamples struct {
	samples int
	seen    map[int64]map[string]int
}

// sampleRunning reads the process list every sampleEvery until ctx ends or the window passes.
// Errors (no PROCESS privilege shows only the user's own sessions) only make the samples poorer.
func sampleRunning(ctx context.Context, q dbconn.Querier, window time.Duration) *runningSamples {
	rs := &runningSamples{seen: map[int64]map[string]int{}}
	end := time.Now().Add(window)
	for time.Now().Before(end) && ctx.Err() == nil {
		rows, err := q.QueryContext(ctx, `SELECT ID, INFO FROM information_schema.PROCESSLIST
			WHERE COMMAND IN ('Query', 'Execute') AND INFO IS NOT NULL AND ID <> CONNECTION_ID()`)
		if err == nil {
			rs.samples++
			for rows.Next() {
				var id int64
				var info string
				if rows.Scan(&id, &info) != nil {
					continue
				}
				text, _, _ := Normalize(info)
				if rs.seen[id] == nil {
					rs.seen[id] = map[string]int{}
				}
				rs.seen[id][canonical(text)]++
			}
			rows.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(sampleEvery, time.Until(end))):
		}
	}
	return rs
}

// canonical makes digest text and a normalised literal statement comparable: digests quote
// identifiers and upper-case some keywords, applications write them as they like.
func canonical(text string) string {
	return strings.ToUpper(strings.Join(strings.Fields(strings.ReplaceAll(text, "`", "")), " "))
}

// dedicated returns how many connections ran text in at least dedicatedShare of the samples, and
// which share of all sightings of text were on those connections (how much of its running time
// the dedicated clients account for; the digests say how much time that is).
func (rs *runningSamples) dedicated(text string) (clients int, share float64) {
	if rs == nil || rs.samples == 0 {
		return 0, 0
	}
	key := canonical(text)
	var mine, all int
	for _, m := range rs.seen {
		all += m[key]
		if float64(m[key])/float64(rs.samples) >= dedicatedShare {
			clients++
			mine += m[key]
		}
	}
	if clients == 0 {
		return 0, 0
	}
	return clients, float64(mine) / float64(all)
}
