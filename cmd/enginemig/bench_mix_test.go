package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

// benchCapturedMix (a subtest of TestBenchCommand, which owns the server) checks --mix auto with
// --observe and --save-mix, --mix FILE, --from-log, and the clear errors of a capture that finds
// nothing: no statements in the window, a missing log, a file that is not a log.
func benchCapturedMix(t *testing.T, db *sql.DB, schema string, conn, short []string) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "mix.json")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			db.Exec(fmt.Sprintf("SELECT name FROM players WHERE id = %d", 1+i%3000))
			if i%10 == 0 {
				db.Exec(fmt.Sprintf("SELECT SUM(coins) FROM players WHERE guild = %d", i%50))
			}
		}
	}()
	out, code := runCLI(t, append(append(conn, short...), "--threads", "2", "--mix", "auto", "--observe", "1s", "--save-mix", saved)...)
	close(stop)
	wg.Wait()
	if code != outcome.OK || !strings.Contains(out, "Mix captured from performance_schema statement digests over a 1s window") ||
		!strings.Contains(out, "SELECT SUM ( `coins` ) FROM `players` WHERE `guild` = ?") {
		t.Fatalf("--mix auto: exit %d:\n%s", code, out)
	}
	out, code = runCLI(t, append(append(conn, short...), "--threads", "2", "--mix", saved, "--output", "json")...)
	var rep struct {
		Capture struct {
			Statements []struct{ Text string } `json:"statements"`
		} `json:"capture"`
		Coverage float64 `json:"captured_coverage"`
		Results  []struct {
			Replay []struct {
				Weight int `json:"weight"`
			} `json:"replay"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != outcome.OK || err != nil || len(rep.Capture.Statements) != 2 || rep.Coverage < 0.99 ||
		len(rep.Results) != 2 || len(rep.Results[1].Replay) != 2 {
		t.Fatalf("--mix FILE: exit %d, %v:\n%s", code, err, out)
	}

	slow := filepath.Join(dir, "slow.log")
	os.WriteFile(slow, []byte(strings.ReplaceAll(`# Time: 241201  2:40:00
# User@Host: app[app] @ localhost []
# Thread_id: 8  Schema: SCHEMA  QC_hit: No
# Query_time: 0.000100  Lock_time: 0.000010  Rows_sent: 1  Rows_examined: 1
SET timestamp=1733020800;
UPDATE players SET coins = coins + 1 WHERE id = 5;
# Query_time: 0.300000  Lock_time: 0.000010  Rows_sent: 1  Rows_examined: 3000
SET timestamp=1733020800;
SELECT COUNT(*) FROM players WHERE coins > 10;
`, "SCHEMA", schema)), 0o600)
	out, code = runCLI(t, append(append(conn, short...), "--threads", "2", "--from-log", slow)...)
	if code != outcome.OK || !strings.Contains(out, "Mix captured from slow log") || !strings.Contains(out, "UPDATE players SET coins = coins + ? WHERE id = ?") {
		t.Fatalf("--from-log: exit %d:\n%s", code, out)
	}

	foreign := filepath.Join(dir, "notes.txt")
	os.WriteFile(foreign, []byte("shopping list\nmilk\n"), 0o600)
	quiet := filepath.Join(dir, "quiet.log")
	os.WriteFile(quiet, []byte("# Query_time: 0.1  Lock_time: 0.0  Rows_sent: 1  Rows_examined: 1\nSELECT 1;\n"), 0o600)
	time.Sleep(50 * time.Millisecond)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mix", "auto", "--observe", "300ms"}, "no statement on the table was seen"},
		{[]string{"--from-log", filepath.Join(dir, "missing.log")}, "no such file"},
		{[]string{"--from-log", foreign}, "not a MySQL/MariaDB slow query log or general query log"},
		{[]string{"--from-log", quiet}, "no statement on the table was seen"},
	} {
		out, code, err := runCLIErr(append(append(conn, short...), tc.args...)...)
		if code != outcome.Usage || err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(out, "qps") {
			t.Errorf("%v: exit %d (%v), want %d and %q:\n%s", tc.args, code, err, outcome.Usage, tc.want, out)
		}
	}
}

// runCLIErr is runCLI that also returns the error main would print.
func runCLIErr(args ...string) (string, outcome.Code, error) {
	var out bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	err := app.RunContext(context.Background(), append([]string{"enginemig"}, args...))
	return out.String(), outcome.CodeOf(err), err
}

// TestGateMixFlags: apply's --gate-mix and --gate-from-log are checked before connecting.
func TestGateMixFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--gate-mix", "nonsense"},
		{"--gate-from-log", filepath.Join(t.TempDir(), "missing.log")},
		{"--gate-from-log", "x.log", "--gate-mix", "auto"},
	} {
		_, code, err := runCLIErr(append([]string{"apply", "--database", "d", "--table", "t", "--host", "127.0.0.1", "--port", "1"}, args...)...)
		if code != outcome.Usage || err == nil || !strings.Contains(err.Error(), "--gate-") {
			t.Errorf("%v: exit %d (%v), want %d", args, code, err, outcome.Usage)
		}
	}
}

// TestDiskFlags: --disk-reserve, --disk-pause-limit and --disk-give-up are checked before
// connecting, each error naming its flag.
func TestDiskFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--disk-reserve", "lots"},
		{"--disk-reserve", "150%"},
		{"--disk-pause-limit", "0s"},
		{"--disk-give-up", "panic"},
	} {
		_, code, err := runCLIErr(append([]string{"apply", "--database", "d", "--table", "t", "--host", "127.0.0.1", "--port", "1"}, args...)...)
		if code != outcome.Usage || err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: exit %d (%v), want %d naming %s", args, code, err, outcome.Usage, args[0])
		}
	}
}

// TestLatencyTargetFlag: --latency-target is a factor of 1 or more, or 0, and belongs to the
// automatic pace; checked before connecting (port 1 has no server), each error naming the flag.
func TestLatencyTargetFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--latency-target", "0.5"},
		{"--latency-target", "-1"},
		{"--latency-target", "NaN"},
		{"--latency-target", "2", "--fixed-pace"},
	} {
		_, code, err := runCLIErr(append([]string{"apply", "--database", "d", "--table", "t", "--host", "127.0.0.1", "--port", "1"}, args...)...)
		if code != outcome.Usage || err == nil || !strings.Contains(err.Error(), "--latency-target") {
			t.Errorf("%v: exit %d (%v), want %d naming --latency-target", args, code, err, outcome.Usage)
		}
	}
}
