package ansible

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/enginemig/enginemig/internal/sandbox"
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest"
)

// The playbooks' tests run ansible-playbook (Debian's ansible package, which .ci/run installs)
// against sandbox servers, with the enginemig binary built from this tree.

// skipEnv lets a developer without Ansible skip these tests on purpose; CI never sets it, so there
// a missing ansible-playbook fails them.
const skipEnv = "ENGINEMIG_SKIP_ANSIBLE"

// password is the fleet account's: quotes, a space and a hash, which an option file or a shell
// would have to quote, and which must never show on a command line.
const password = `fl"eet 'pw#9`

// dbHost is one inventory host: a sandbox server with the database shop.
type dbHost struct {
	name string
	srv  *sandbox.Server
	db   *sql.DB // root, database shop
	// vars are extra inventory variables of this host.
	vars map[string]any
}

// fleet is the servers, the binary, the inventory and the report directory of one test.
type fleet struct {
	dir     string
	bin     string
	reports string
	hosts   []*dbHost
	// lastOut is the output of the last playbook run, for failure messages.
	lastOut string
}

// hostSpec says how to seed one host: rows in shop.orders, and whether shop.audit (a member of
// the MERGE table shop.audit_all: a plan blocker) is there too.
type hostSpec struct {
	name    string
	rows    int
	blocker bool
	vars    map[string]any
}

func requireAnsible(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		if os.Getenv(skipEnv) != "" {
			t.Skipf("ansible-playbook not found and %s is set", skipEnv)
		}
		t.Fatalf("ansible-playbook not found (%v): apt-get install ansible (.ci/run does), or set %s=1 to skip the playbook tests", err, skipEnv)
	}
}

// newFleet builds the binary and starts one server per spec, all at once.
func newFleet(t *testing.T, specs ...hostSpec) *fleet {
	t.Helper()
	requireAnsible(t)
	f := &fleet{dir: t.TempDir()}
	f.reports = filepath.Join(f.dir, "reports")
	f.bin = filepath.Join(f.dir, "enginemig")
	var g errgroup.Group
	g.Go(func() error {
		out, err := exec.Command("go", "build", "-o", f.bin, "github.com/enginemig/enginemig/cmd/enginemig").CombinedOutput()
		if err != nil {
			return fmt.Errorf("build enginemig: %v\n%s", err, out)
		}
		return nil
	})
	flavour, err := sandboxtest.Flavour()
	if err != nil {
		t.Fatal(err)
	}
	f.hosts = make([]*dbHost, len(specs))
	for i, spec := range specs {
		g.Go(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			srv, err := sandbox.Start(ctx, sandbox.Options{Flavour: flavour})
			if err != nil {
				return fmt.Errorf("%s: %w", spec.name, err)
			}
			h := &dbHost{name: spec.name, srv: srv, vars: spec.vars}
			f.hosts[i] = h
			return h.seed(spec)
		})
	}
	err = g.Wait()
	t.Cleanup(func() {
		for _, h := range f.hosts {
			if h != nil {
				if h.db != nil {
					h.db.Close()
				}
				h.srv.Stop()
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// seed creates the fleet account and shop's tables: orders and customers (MyISAM), sessions
// (InnoDB already), and on a blocked host audit (a MERGE table's member).
func (h *dbHost) seed(spec hostSpec) error {
	root, err := h.srv.Open("")
	if err != nil {
		return err
	}
	defer root.Close()
	stmts := []string{
		"CREATE USER 'fleet'@'127.0.0.1' IDENTIFIED BY ?",
		"GRANT ALL ON *.* TO 'fleet'@'127.0.0.1'",
		"CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, customer INT NOT NULL, note VARCHAR(40) NOT NULL, KEY (customer)) ENGINE=MyISAM",
		"INSERT INTO shop.orders (customer, note) SELECT seq % 97, CONCAT('order ', seq) FROM " + sandboxtest.Seq(spec.rows),
		"CREATE TABLE shop.customers (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL) ENGINE=MyISAM",
		"INSERT INTO shop.customers SELECT seq, CONCAT('customer ', seq) FROM " + sandboxtest.Seq(97),
		"CREATE TABLE shop.sessions (id INT NOT NULL PRIMARY KEY) ENGINE=InnoDB",
		"INSERT INTO shop.sessions VALUES (1), (2)",
	}
	if spec.blocker {
		stmts = append(stmts, "CREATE TABLE shop.audit (at INT, what VARCHAR(20)) ENGINE=MyISAM",
			"INSERT INTO shop.audit VALUES (1, 'a'), (2, 'b'), (2, 'b')",
			"CREATE TABLE shop.audit_all (at INT, what VARCHAR(20)) ENGINE=MRG_MyISAM UNION=(shop.audit)")
	}
	for i, q := range stmts {
		var args []any
		if i == 0 {
			args = []any{password}
		}
		if _, err := root.Exec(q, args...); err != nil {
			return fmt.Errorf("%s: %s: %w", h.name, q, err)
		}
	}
	h.db, err = h.srv.Open("shop")
	return err
}

// tableState is what the tests compare of a table: its engine and a hash of its rows in order.
type tableState struct {
	Engine string
	Rows   int
	Hash   string
}

// state returns every base table of shop.
func (h *dbHost) state(t *testing.T) map[string]tableState {
	t.Helper()
	rows, err := h.db.Query("SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'shop' AND TABLE_TYPE = 'BASE TABLE'")
	if err != nil {
		t.Fatalf("%s: %v", h.name, err)
	}
	out := map[string]tableState{}
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			t.Fatal(err)
		}
		out[name] = tableState{Engine: engine}
	}
	rows.Close()
	for name, st := range out {
		st.Rows, st.Hash = h.hashRows(t, name)
		out[name] = st
	}
	return out
}

// hashRows hashes a table's rows ordered by every column, whatever its engine.
func (h *dbHost) hashRows(t *testing.T, table string) (int, string) {
	t.Helper()
	var cols int
	if err := h.db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop' AND TABLE_NAME = ?", table).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	order := make([]string, cols)
	for i := range order {
		order[i] = strconv.Itoa(i + 1)
	}
	rows, err := h.db.Query("SELECT * FROM `" + table + "` ORDER BY " + strings.Join(order, ", "))
	if err != nil {
		t.Fatalf("%s: read %s: %v", h.name, table, err)
	}
	defer rows.Close()
	sum := sha256.New()
	vals := make([]sql.RawBytes, cols)
	ptrs := make([]any, cols)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			fmt.Fprintf(sum, "%d:%s|", len(v), v)
		}
		sum.Write([]byte{'\n'})
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n, hex.EncodeToString(sum.Sum(nil))
}

// hasStateSchema says whether apply ever ran against the host (it creates _enginemig).
func (h *dbHost) hasStateSchema(t *testing.T) bool {
	t.Helper()
	var n int
	if err := h.db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '_enginemig'").Scan(&n); err != nil {
		t.Fatalf("%s: %v", h.name, err)
	}
	return n > 0
}

// requireUnchanged fails unless the host's tables are exactly as before (engines, rows, no new
// table) and apply never ran there.
func (h *dbHost) requireUnchanged(t *testing.T, before map[string]tableState, why string) {
	t.Helper()
	if got := h.state(t); !equalStates(got, before) {
		t.Errorf("%s changed (%s):\nbefore %v\nafter  %v", h.name, why, before, got)
	}
	if h.hasStateSchema(t) {
		t.Errorf("%s: apply ran there (the _enginemig schema exists) although %s", h.name, why)
	}
}

// requireConverted fails unless every MyISAM table of before is InnoDB with the same rows, and
// the only new tables are the kept originals (_<t>_old, MyISAM, same rows).
func (h *dbHost) requireConverted(t *testing.T, before map[string]tableState) {
	t.Helper()
	got := h.state(t)
	for name, b := range before {
		want := b
		if b.Engine == "MyISAM" {
			want.Engine = "InnoDB"
			if old := got["_"+name+"_old"]; old != b {
				t.Errorf("%s: the kept original _%s_old is %v, want %v", h.name, name, old, b)
			}
		}
		if got[name] != want {
			t.Errorf("%s: shop.%s is %v, want %v", h.name, name, got[name], want)
		}
	}
	for name := range got {
		if _, ok := before[name]; !ok && !(strings.HasPrefix(name, "_") && strings.HasSuffix(name, "_old")) {
			t.Errorf("%s: unexpected table shop.%s left behind", h.name, name)
		}
	}
}

func equalStates(a, b map[string]tableState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func (f *fleet) states(t *testing.T) []map[string]tableState {
	out := make([]map[string]tableState, len(f.hosts))
	for i, h := range f.hosts {
		out[i] = h.state(t)
	}
	return out
}

// writeInventory writes the inventory the playbooks run with: every host's address and the
// shared account, as a DBA would (the password in the inventory; in real life from Vault).
func (f *fleet) writeInventory(t *testing.T) string {
	t.Helper()
	hosts := map[string]any{}
	for _, h := range f.hosts {
		vars := map[string]any{"enginemig_host": "127.0.0.1", "enginemig_port": h.srv.Port}
		for k, v := range h.vars {
			vars[k] = v
		}
		hosts[h.name] = vars
	}
	inv := map[string]any{"all": map[string]any{
		"vars":  map[string]any{"enginemig_user": "fleet", "enginemig_password": password, "enginemig_database": "shop"},
		"hosts": hosts,
	}}
	b, err := json.MarshalIndent(inv, "", "  ") // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "inventory.yml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// playbook is one running ansible-playbook.
type playbook struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	code int
	// seen: processes whose command line or environment held the password while it ran.
	mu   sync.Mutex
	seen []string
}

// start runs ansible-playbook on playbook (convert.yml or rollback.yml) with run-wide vars and
// more arguments, in the background.
func (f *fleet) start(t *testing.T, name string, vars map[string]any, args ...string) *playbook {
	t.Helper()
	all := map[string]any{"enginemig_binary": f.bin, "enginemig_report_dir": f.reports}
	for k, v := range vars {
		all[k] = v
	}
	extra, _ := json.Marshal(all)
	tmp := filepath.Join(f.dir, "ansible-tmp")
	argv := append([]string{"-i", f.writeInventory(t), name, "-e", string(extra)}, args...)
	p := &playbook{cmd: exec.Command("ansible-playbook", argv...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "ANSIBLE_NOCOLOR=1", "ANSIBLE_LOCAL_TEMP="+tmp, "ANSIBLE_REMOTE_TEMP="+tmp,
		"ANSIBLE_HOME="+filepath.Join(f.dir, "ansible-home"), "ANSIBLE_RETRY_FILES_ENABLED=0")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopWatch := make(chan struct{})
	go p.watchPassword(stopWatch)
	go func() {
		err := p.cmd.Wait()
		close(stopWatch)
		p.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// watchPassword scans every process's command line and environment for the password, as ps and
// /proc would show them to any user of the control node.
func (p *playbook) watchPassword(stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			for _, file := range []string{"cmdline", "environ"} {
				b, err := os.ReadFile(filepath.Join(d, file))
				if err == nil && bytes.Contains(b, []byte(password)) {
					p.mu.Lock()
					p.seen = append(p.seen, fmt.Sprintf("%s/%s: %q", d, file, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
					p.mu.Unlock()
				}
			}
		}
	}
}

// wait returns the exit code and output, and fails the test if the password showed anywhere.
func (p *playbook) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(10 * time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("ansible-playbook did not finish within 10 minutes:\n%s", p.out.String())
	}
	out := p.out.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) > 0 {
		t.Errorf("the password was visible in a process's command line or environment:\n%s", strings.Join(p.seen, "\n"))
	}
	if strings.Contains(out, password) {
		t.Errorf("the password is in ansible-playbook's output")
	}
	return p.code, out
}

// play runs a playbook to the end.
func (f *fleet) play(t *testing.T, name string, vars map[string]any, args ...string) (int, string) {
	t.Helper()
	start := time.Now()
	code, out := f.start(t, name, vars, args...).wait(t)
	f.lastOut = out
	t.Logf("ansible-playbook %s %s: exit %d in %s", name, strings.Join(args, " "), code, time.Since(start).Round(100*time.Millisecond))
	return code, out
}

// recapLine is one host's line of ansible-playbook's PLAY RECAP.
type recapLine struct{ ok, changed, failed int }

var recapRe = regexp.MustCompile(`(?m)^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)`)

func recap(out string) map[string]recapLine {
	got := map[string]recapLine{}
	for _, m := range recapRe.FindAllStringSubmatch(out, -1) {
		ok, _ := strconv.Atoi(m[2])
		changed, _ := strconv.Atoi(m[3])
		failed, _ := strconv.Atoi(m[4])
		got[m[1]] = recapLine{ok, changed, failed}
	}
	return got
}

// summary is the fleet summary's JSON.
type summary struct {
	Name    string         `json:"name"`
	DryRun  bool           `json:"dry_run"`
	Counts  map[string]int `json:"counts"`
	Hosts   []hostResult   `json:"hosts"`
	Version string         `json:"enginemig"`
}

type hostResult struct {
	Host     string `json:"host"`
	Outcome  string `json:"outcome"`
	Reason   string `json:"reason"`
	Changed  bool   `json:"changed"`
	ExitCode int    `json:"exit_code"`
	Status   string `json:"status"`
	Tables   []struct {
		Table         string  `json:"table"`
		Outcome       string  `json:"outcome"`
		Rows          int64   `json:"rows"`
		Seconds       float64 `json:"seconds"`
		CutoverLockMS float64 `json:"cutover_lock_ms"`
	} `json:"tables"`
}

func (f *fleet) summary(t *testing.T, name string) (summary, map[string]hostResult) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.reports, name+".json"))
	if err != nil {
		t.Fatalf("%v; the last playbook's output:\n%s", err, f.lastOut)
	}
	var s summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s.json: %v\n%s", name, err, b)
	}
	byHost := map[string]hostResult{}
	for _, h := range s.Hosts {
		byHost[h.Host] = h
	}
	return s, byHost
}

// outcomes is "db1=done db2=refused ..." in host order, for messages and comparisons.
func outcomes(s summary) string {
	var parts []string
	for _, h := range s.Hosts {
		parts = append(parts, h.Host+"="+h.Outcome)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// control sends a command to a running apply's control socket.
func (f *fleet) control(t *testing.T, socket, command string) {
	t.Helper()
	if out, err := exec.Command(f.bin, "control", "--socket", socket, command).CombinedOutput(); err != nil {
		t.Fatalf("control %s: %v\n%s", command, err, out)
	}
}

// requireRolledBack fails unless every table is as before (MyISAM again, the same rows) and the
// only new tables are the kept InnoDB copies (_<t>_new).
func (h *dbHost) requireRolledBack(t *testing.T, before map[string]tableState) {
	t.Helper()
	got := h.state(t)
	for name, b := range before {
		if got[name] != b {
			t.Errorf("%s: shop.%s is %v after the rollback, want %v", h.name, name, got[name], b)
		}
	}
	for name := range got {
		if _, ok := before[name]; !ok && !(strings.HasPrefix(name, "_") && strings.HasSuffix(name, "_new")) {
			t.Errorf("%s: unexpected table shop.%s after the rollback", h.name, name)
		}
	}
}
