package throttle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// flowControl is the last flow-control reading of a Galera node. Any node whose receive queue
// passes its gcs.fc_limit pauses replication for the whole cluster, and while it is paused every
// commit on every node waits: the copy must not add to the queue then, like it must not widen a
// replica's lag. wsrep_flow_control_paused_ns only grows, so a rise between two readings means the
// cluster was paused meanwhile, even for a moment no reading saw.
type flowControl struct {
	pausedNS  int64
	grew      bool // pausedNS rose since the reading before
	active    bool // wsrep_flow_control_active (MariaDB 10.6+): paused right now
	recvQueue int64
	sample    sample
}

func (t *Throttler) checkFlowControl(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, t.checkTimeout())
	defer cancel()
	st := map[string]string{}
	rows, err := t.primary.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_flow_control_paused_ns', 'wsrep_flow_control_active', 'wsrep_local_recv_queue')")
	if err == nil {
		for rows.Next() {
			var k, v string
			if err = rows.Scan(&k, &v); err != nil {
				break
			}
			st[strings.ToLower(k)] = v
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // stopping
	}
	var paused, queue int64
	if err == nil {
		if _, err = fmt.Sscan(st["wsrep_flow_control_paused_ns"], &paused); err != nil {
			err = fmt.Errorf("wsrep_flow_control_paused_ns %q: %w", st["wsrep_flow_control_paused_ns"], err)
		}
		fmt.Sscan(st["wsrep_local_recv_queue"], &queue)
	}
	t.record(func() {
		fc := &t.flow
		fc.grew = err == nil && !fc.sample.at.IsZero() && fc.sample.err == nil && paused > fc.pausedNS
		fc.pausedNS, fc.recvQueue, fc.active = paused, queue, strings.EqualFold(st["wsrep_flow_control_active"], "true")
		fc.sample = sample{value: paused, err: err, at: time.Now()}
	})
}

// flowControlLocked adds flow control to the verdict when the throttle watches a Galera node.
func (t *Throttler) flowControlLocked(v *verdict, now time.Time) {
	if !t.cfg.Galera {
		return
	}
	fc := t.flow
	switch {
	case fc.sample.at.IsZero():
		v.add("flow-control-unknown", "cannot read Galera flow control yet")
	case fc.sample.err != nil:
		v.add("flow-control-unknown", fmt.Sprintf("cannot read Galera flow control: %v", fc.sample.err))
	case now.Sub(fc.sample.at) > t.staleAfter():
		v.add("flow-control-unknown", fmt.Sprintf("cannot read Galera flow control: no answer for %s", round(now.Sub(fc.sample.at))))
	case fc.active || fc.grew:
		v.add("flow-control", fmt.Sprintf("Galera flow control paused the cluster (wsrep_flow_control_paused_ns rose; receive queue here %d)", fc.recvQueue))
	}
}
