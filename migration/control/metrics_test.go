package control

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/pace/diskspace"
	"github.com/enginemig/enginemig/pace/lockwait"
	"github.com/enginemig/enginemig/pace/throttle"
)

// One endpoint over a board of two migrations (apply --plan --parallel): each table's series are
// there, and two waits of one kind in one migration make one blocked series, not a scrape error
// for a duplicate.
func TestBoardServesEveryMigration(t *testing.T) {
	var b Board
	holder := lockwait.Session{ID: 12, User: "app", Command: "Sleep"}
	b.Add(func() Status {
		return Status{Schema: "s", Table: "t1", Stage: "copy", RowsCopied: 10, StageETA: 90 * time.Second, RunETA: 150 * time.Second, Disk: &diskspace.Status{Low: true,
			FS: []diskspace.FS{{Mount: "/data", Roles: []string{"datadir", "binlog"}, Free: 5 << 20, Reserve: 64 << 20}}},
			Pace: &throttle.GentleState{Level: 3, LatencyBaseline: 0.0005, LatencyTarget: 0.004, LatencyP99: 0.0062, ChunkLockBound: 0.0025}}
	})
	remove := b.Add(func() Status {
		return Status{Schema: "s", Table: "t2", Stage: "copy", LockWaits: 2, Waiting: []lockwait.Wait{
			{Kind: lockwait.KindLock, Waited: time.Second, Blockers: []lockwait.Session{holder}},
			{Kind: lockwait.KindLock, Waited: 3 * time.Second, Blockers: []lockwait.Session{holder}},
		}}
	})
	m, err := ServeBoard("127.0.0.1:0", b.Statuses)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	get := func() (int, string) {
		resp, err := http.Get("http://" + m.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get()
	for _, want := range []string{`enginemig_rows_copied{schema="s",table="t1"} 10`, `enginemig_lock_waits_total{schema="s",table="t2"} 2`,
		`enginemig_blocked_seconds{on="lock",schema="s",table="t2"} 3`, `enginemig_blocked_by{connection="12",on="lock",schema="s",table="t2",user="app"} 1`,
		`enginemig_disk_free_bytes{mount="/data",roles="datadir+binlog",schema="s",table="t1"} 5.24288e+06`,
		`enginemig_disk_reserve_bytes{mount="/data",roles="datadir+binlog",schema="s",table="t1"} 6.7108864e+07`,
		`enginemig_disk_low{schema="s",table="t1"} 1`, `enginemig_pace_level{schema="s",table="t1"} 3`,
		`enginemig_pace_latency_target_seconds{schema="s",table="t1"} 0.004`, `enginemig_pace_latency_p99_seconds{schema="s",table="t1"} 0.0062`,
		`enginemig_pace_latency_baseline_seconds{schema="s",table="t1"} 0.0005`, `enginemig_pace_chunk_lock_bound_seconds{schema="s",table="t1"} 0.0025`,
		`enginemig_stage_eta_seconds{schema="s",table="t1"} 90`, `enginemig_run_eta_seconds{schema="s",table="t1"} 150`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("status %d, metrics lack %s:\n%s", code, want, body)
		}
	}
	remove()
	if _, body := get(); strings.Contains(body, `table="t2"`) {
		t.Fatalf("a finished migration is still served:\n%s", body)
	}
}
