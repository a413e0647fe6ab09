package realapp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// The test's phases: the load warms the wiki's caches, then runs beforeWindow for the latency
// before apply, then through plan and apply, then afterApply more with every table InnoDB.
const (
	warmUp       = 2 * time.Second
	beforeWindow = 15 * time.Second // about 230 page views: a p99 that is not their maximum
	afterApply   = time.Second
)

// TestMediaWikiConvertsUnderItsOwnTraffic installs MediaWiki into a sandbox server, makes its
// tables MyISAM, and runs `enginemig plan` and `enginemig apply --plan` (apply's defaults) while
// web clients view, search and edit pages. Every response must be what the wiki answers when
// nothing happens to its database, MediaWiki's DB error and exception logs must stay empty,
// every acknowledged edit must read back, and every table must end InnoDB.
func TestMediaWikiConvertsUnderItsOwnTraffic(t *testing.T) {
	php := requireWiki(t)
	began := time.Now()
	built := make(chan error, 1)
	bin := filepath.Join(t.TempDir(), "enginemig")
	go func() { built <- buildEnginemig(bin) }()
	srv := sandboxtest.ForTest(t, sandbox.Options{})
	w := installWiki(t, srv, php)
	l := newLoad(w)
	l.seed(t)
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	t.Logf("MediaWiki installed, %d tables made MyISAM, %d pages written, enginemig built: %v",
		len(w.tables), seedPages, time.Since(began).Round(100*time.Millisecond))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	l.start(ctx)
	time.Sleep(warmUp)
	beforeFrom, cpuFrom := time.Now(), cpuNow(srv.Pid())
	time.Sleep(beforeWindow)
	beforeTo, cpuTo := time.Now(), cpuNow(srv.Pid())
	t.Logf("CPU before apply: %s", cpuReport(cpuFrom, cpuTo, 0, beforeTo.Sub(beforeFrom)))

	conn := connArgs(t, srv)
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if out, err := runEnginemig(bin, append(append([]string{"plan"}, conn...), "--database", wikiDB, "--out", planFile)...); err != nil {
		t.Fatalf("enginemig plan: %v\n%s", err, out)
	}
	applyFrom, cpuFrom := time.Now(), cpuNow(srv.Pid())
	out, used, err := runEnginemigCPU(bin, append([]string{"apply", "--plan", planFile}, conn...)...)
	applyTo, cpuTo := time.Now(), cpuNow(srv.Pid())
	t.Logf("CPU during apply: %s", cpuReport(cpuFrom, cpuTo, used, applyTo.Sub(applyFrom)))
	time.Sleep(afterApply)
	stop()
	l.wait()
	if err != nil {
		t.Errorf("enginemig apply --plan: %v\n%s", err, out)
	}
	t.Logf("apply --plan converted %d tables in %v", strings.Count(out, " converted: "), applyTo.Sub(applyFrom).Round(100*time.Millisecond))

	reportLoad(t, l, beforeFrom, beforeTo, applyFrom, applyTo)
	t.Logf("cut-overs that waited for older transactions: %s", snapshotWaits(out))
	t.Logf("the slowest page views during apply, and what apply logged meanwhile:\n%s", slowestViews(l.reqs, out, applyFrom, applyTo, 5))
	logged := w.appErrors(t)
	if len(l.failures) > 0 {
		t.Errorf("%d requests failed (0 allowed):\n%s", len(l.failures), strings.Join(l.failures, "\n"))
	}
	if logged != "" {
		t.Errorf("MediaWiki logged errors (0 allowed):\n%s", logged)
	}
	checkEditsReadBack(t, l)
	checkSearchFindsEveryPage(t, l)
	checkAllInnoDB(t, srv, w.tables)
	if t.Failed() {
		t.Logf("apply's cut-overs, to set beside the failures' times:\n%s", cutoverLines(out))
		t.Logf("php -S log, its end:\n%s", w.tail(w.srvLog))
	}
	t.Logf("the whole test: %v", time.Since(began).Round(100*time.Millisecond))
}

// reportLoad logs what the clients did before and during apply, checks that each kind of request
// ran through apply (otherwise nothing was tested), and the page views' latency.
func reportLoad(t *testing.T, l *load, beforeFrom, beforeTo, applyFrom, applyTo time.Time) {
	t.Helper()
	for _, kind := range []string{"view", "search", "edit"} {
		before := latencies(l.reqs, kind, beforeFrom, beforeTo)
		during := latencies(l.reqs, kind, applyFrom, applyTo)
		t.Logf("%-6s before: %4d, p50 %4dms, p99 %4dms | during apply: %4d, p50 %4dms, p99 %4dms", kind,
			len(before), percentile(before, 50).Milliseconds(), percentile(before, 99).Milliseconds(),
			len(during), percentile(during, 50).Milliseconds(), percentile(during, 99).Milliseconds())
		if len(during) == 0 {
			t.Errorf("no %s request ran while apply did", kind)
		}
	}
	t.Logf("%d edits acknowledged", len(l.acks))
	checkPageViewP99(t, latencies(l.reqs, "view", beforeFrom, beforeTo), latencies(l.reqs, "view", applyFrom, applyTo))
}

// cutoverLines returns apply's log lines that say when each table's cut-over was done.
func cutoverLines(out string) string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `msg="cut-over done"`) {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}

// slowestViews lists the n slowest page views that started while apply ran, each with apply's log
// lines from its time (or the last line before it): where a whole-database run's tail latency
// comes from (#39's p99 goal).
func slowestViews(reqs []request, out string, from, to time.Time, n int) string {
	type logged struct {
		at   time.Time
		line string
	}
	var lines []logged
	for _, line := range strings.Split(out, "\n") {
		stamp, _, ok := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		if at, err := time.Parse(time.RFC3339Nano, stamp); ok && err == nil {
			lines = append(lines, logged{at, line})
		}
	}
	var views []request
	for _, r := range reqs {
		if r.kind == "view" && !r.start.Before(from) && r.start.Before(to) {
			views = append(views, r)
		}
	}
	sort.Slice(views, func(i, j int) bool { return views[i].took > views[j].took })
	var b strings.Builder
	for _, v := range views[:min(n, len(views))] {
		fmt.Fprintf(&b, "  %v at +%v:\n", v.took.Round(time.Millisecond), v.start.Sub(from).Round(time.Millisecond))
		last, shown := "", 0
		for _, l := range lines {
			if l.at.Before(v.start) {
				last = l.line
			} else if l.at.Before(v.start.Add(v.took)) && shown < 4 {
				fmt.Fprintf(&b, "    %s\n", l.line)
				shown++
			}
		}
		if shown == 0 {
			fmt.Fprintf(&b, "    (before it) %s\n", last)
		}
	}
	return b.String()
}

// snapshotWaits sums up apply's waits for transactions older than a cut-over: how many cut-overs
// waited, for how long in all and at most, and how many went ahead past a transaction open too long.
func snapshotWaits(out string) string {
	var n, outlasted int
	var total, longest time.Duration
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "swapping with transactions open since before the cut-over") {
			outlasted++
		}
		if !strings.Contains(line, `msg="transactions older than the cut-over have ended"`) {
			continue
		}
		_, waited, _ := strings.Cut(line, " waited=")
		d, err := time.ParseDuration(strings.Fields(waited + " ")[0])
		if err != nil {
			continue
		}
		n, total, longest = n+1, total+d, max(longest, d)
	}
	return fmt.Sprintf("%d, %s in all, at most %s; %d went ahead past a transaction open longer than the bound", n,
		total.Round(time.Millisecond), longest.Round(time.Millisecond), outlasted)
}

// buildEnginemig builds the CLI the test runs, as users run it.
func buildEnginemig(bin string) error {
	out, err := exec.Command("go", "build", "-o", bin, "github.com/enginemig/enginemig/cmd/enginemig").CombinedOutput()
	if err != nil {
		return errors.New("build enginemig: " + err.Error() + "\n" + string(out))
	}
	return nil
}

// connArgs are the connection flags for srv as root, with an empty option file so that no
// ~/.my.cnf of the machine's user is read.
func connArgs(t *testing.T, srv *sandbox.Server) []string {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--defaults-file", empty, "--host", "127.0.0.1", "--port", strconv.Itoa(srv.Port),
		"--user", "root", "--ssl-mode", "DISABLED"}
}

// runEnginemig runs the CLI to its end and returns its output. The limit only stops a hung run:
// apply took up to 2 min 19 s on a 2-core machine busy with other tests.
func runEnginemig(bin string, args ...string) (string, error) {
	out, _, err := runEnginemigCPU(bin, args...)
	return out, err
}

// runEnginemigCPU is runEnginemig that also says how much CPU time the run used.
func runEnginemigCPU(bin string, args ...string) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	var used time.Duration
	if cmd.ProcessState != nil {
		used = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return string(out), used, err
}
