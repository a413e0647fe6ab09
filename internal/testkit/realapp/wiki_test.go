package realapp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// mediawikiDir is where Debian's mediawiki package puts the code; requireEnv names the variable
// that turns a missing MediaWiki or PHP into a failure instead of a skip (.ci/run sets it).
const (
	mediawikiDir = "/usr/share/mediawiki"
	requireEnv   = "ENGINEMIG_REQUIRE_WIKI"
	wikiDB       = "wiki"
)

// requireWiki returns the php binary, or skips the test (fails it when requireEnv is 1) with what
// to install.
func requireWiki(t *testing.T) string {
	t.Helper()
	php, err := exec.LookPath("php")
	if err == nil {
		var out []byte
		out, err = exec.Command(php, "-m").Output()
		if err == nil && !strings.Contains(string(out), "mysqli") {
			err = errors.New("php has no mysqli module")
		}
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(mediawikiDir, "maintenance", "install.php"))
	}
	if err == nil {
		return php
	}
	msg := fmt.Sprintf("MediaWiki or PHP missing (%v): install them with "+
		"`apt-get install -y --no-install-recommends mediawiki php-cli php-mysql` (Debian 12)", err)
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("%s; %s=1 asks for this test", msg, requireEnv)
	}
	t.Skipf("%s; set %s=1 to make this a failure", msg, requireEnv)
	return ""
}

// wiki is one MediaWiki installed into a sandbox server's database and served by `php -S`.
type wiki struct {
	url      string // http://127.0.0.1:PORT, no trailing slash
	dir      string // LocalSettings.php, caches, logs
	dbErrLog string // $wgDBerrorLog: every DB error MediaWiki saw
	excLog   string // the exception and error channels
	srvLog   string // php -S's own output
	tables   []string
}

// installWiki installs MediaWiki into database wikiDB on srv (as its own account "wiki", the
// installer creating it), makes every table MyISAM as a legacy install has them, and serves it
// with PHP's built-in server until the test ends.
func installWiki(t *testing.T, srv *sandbox.Server, php string) *wiki {
	t.Helper()
	port := freePort(t)
	w := &wiki{url: "http://127.0.0.1:" + strconv.Itoa(port), dir: t.TempDir()}
	w.dbErrLog = filepath.Join(w.dir, "db-error.log")
	w.excLog = filepath.Join(w.dir, "exception.log")
	w.srvLog = filepath.Join(w.dir, "php-server.log")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, php, filepath.Join(mediawikiDir, "maintenance", "install.php"),
		"--confpath", w.dir, "--dbtype", "mysql", "--dbserver", "127.0.0.1:"+strconv.Itoa(srv.Port),
		"--dbname", wikiDB, "--dbuser", "wiki", "--dbpass", "wiki-pass",
		"--installdbuser", "root", "--installdbpass", "",
		"--server", w.url, "--scriptpath", "", "--lang", "en",
		"--pass", "Admin-passw0rd-for-tests", "Enginemig test wiki", "Admin")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install MediaWiki: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(w.dir, "cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings, err := os.OpenFile(filepath.Join(w.dir, "LocalSettings.php"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The DB error log is what the test reads for the application's DB errors; localisation
	// caches in files as a production wiki has them; no rate limit for the test's anonymous
	// editors (all from 127.0.0.1); jobs not run by web requests, as busy wikis run them (two
	// requests each running a job on the converted, InnoDB job table once deadlocked on its rows,
	// 55 s after its swap: InnoDB's behaviour, which docs/runbook.md names, not the conversion's).
	_, err = fmt.Fprintf(settings, `
$wgCacheDirectory = %q;
$wgDBerrorLog = %q;
$wgDebugLogGroups['exception'] = %q;
$wgDebugLogGroups['error'] = %q;
$wgGroupPermissions['*']['noratelimit'] = true;
$wgJobRunRate = 0;
`, filepath.Join(w.dir, "cache"), w.dbErrLog, w.excLog, w.excLog)
	if cerr := settings.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	w.tables = makeMyISAM(t, srv)
	w.serve(t, php, port)
	return w
}

// makeMyISAM converts every table of the wiki to MyISAM and returns their names.
func makeMyISAM(t *testing.T, srv *sandbox.Server) []string {
	t.Helper()
	db, err := srv.Open(wikiDB)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name", wikiDB)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range tables {
		sandboxtest.MustExec(t, db, "ALTER TABLE "+dbconn.QuoteIdent(name)+" ENGINE=MyISAM")
	}
	if len(tables) < 50 {
		t.Fatalf("MediaWiki's installer made %d tables, want its 50-odd: %v", len(tables), tables)
	}
	return tables
}

// serve starts PHP's built-in server on port with one worker process per concurrent client
// (it serves one request at a time per process), and stops the whole process group when the test
// ends.
func (w *wiki) serve(t *testing.T, php string, port int) {
	t.Helper()
	logFile, err := os.Create(w.srvLog)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(php, "-S", "127.0.0.1:"+strconv.Itoa(port), "-t", mediawikiDir)
	cmd.Env = append(os.Environ(), "MW_CONFIG_FILE="+filepath.Join(w.dir, "LocalSettings.php"),
		"PHP_CLI_SERVER_WORKERS="+strconv.Itoa(phpWorkers))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start php -S: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logFile.Close(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(w.url + "/api.php?action=query&meta=siteinfo&format=json")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		select {
		case <-done:
			t.Fatalf("php -S exited: %s", w.tail(w.srvLog))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("MediaWiki does not answer at %s: %v\n%s", w.url, err, w.tail(w.srvLog))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail returns the end of a log file, for failure messages.
func (w *wiki) tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// appErrors returns what MediaWiki wrote to its DB error log and its exception log ("" when it
// wrote nothing; a missing file is nothing written).
func (w *wiki) appErrors(t *testing.T) string {
	t.Helper()
	var out strings.Builder
	for _, path := range []string{w.dbErrLog, w.excLog} {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 {
			fmt.Fprintf(&out, "%s:\n%s\n", filepath.Base(path), b)
		}
	}
	return out.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
