package plan

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/mdl"
	"github.com/enginemig/enginemig/pace/diskspace"
)

// Querier is what plan reads through: a *sql.DB or a *sql.Conn.
type Querier = dbconn.Execer

// ServerInfo is what plan knows about the server; server-level checks read it, table checks too.
type ServerInfo struct {
	Version  string `json:"version"`
	Flavor   string `json:"flavor"` // mariadb or mysql
	Hostname string `json:"hostname"`
	User     string `json:"user"` // CURRENT_USER(), whose privileges were checked
	// Variables holds the global variables the checks read (absent when the server lacks one).
	Variables map[string]string `json:"variables"`
	// Status holds the global status counters the application checks read.
	Status map[string]int64 `json:"status"`
	// OwnLockTables is how many of Com_lock_tables this process sent (verification, cut-overs
	// of the tables apply --plan converted before this one): the lock-tables check leaves them out.
	OwnLockTables int64 `json:"-"`
	// PerformanceSchema is on, and which of its tables plan could use.
	PerformanceSchema bool `json:"performance_schema"`
	DigestsAvailable  bool `json:"digests_available"`
	// FreeDiskBytes is free space on the datadir's file system, -1 when unknown (remote server).
	FreeDiskBytes int64 `json:"free_disk_bytes"`
	// Disk lists the file systems of the datadir, binlog and tmpdir as diskspace read them (statfs
	// on the database host, or information_schema.DISKS), with DiskSource; DiskUnseen says why
	// they could not be read.
	Disk       []diskspace.FS `json:"disk_file_systems,omitempty"`
	DiskSource string         `json:"disk_source,omitempty"`
	DiskUnseen string         `json:"disk_unseen,omitempty"`
	// TestCompileBinlogged says the test-compile CREATE/DROP went to the binlog (no privilege to
	// set sql_log_bin=0 in the session), so replicas saw the scratch table come and go.
	TestCompileBinlogged bool `json:"test_compile_binlogged,omitempty"`

	// Managed is the managed service the server is, where plan recognises it (nil otherwise).
	Managed *Managed `json:"managed,omitempty"`
	// Account is the limits of the account plan connects as (the one apply will use).
	Account AccountLimits `json:"account"`
	// ApplyConnections is the most connections apply holds at once (0: not known to the caller;
	// the account-limits check then leaves the connection cap out).
	ApplyConnections int `json:"-"`

	// Galera is the cluster this server is a node of (nil when wsrep_on is off).
	Galera *Galera `json:"galera,omitempty"`

	// WantCapture is the capture apply is asked to use (CaptureAuto when empty; see ChooseCapture).
	WantCapture string `json:"-"`
	// MaxHold is the longest a keyless table without an index to walk may hold the
	// application's writes for its one-chunk copy (DefaultMaxHold when 0; check keyless-hold).
	MaxHold time.Duration `json:"-"`

	Grants    *Grants      `json:"-"`
	GrantsErr string       `json:"-"`
	Digests   []Digest     `json:"-"`
	reads     *digestReads // Digests' SELECTs by the tables they read (readsOf)
	// Totals over the planned tables, for the capacity checks; nil outside Inspect.
	Totals *Totals `json:"-"`

	major, minor, patch int
}

// Totals sums the estimates of all planned tables.
type Totals struct {
	Tables         int   `json:"tables"`
	Rows           int64 `json:"rows"`
	DataBytes      int64 `json:"data_bytes"`
	IndexBytes     int64 `json:"index_bytes"`
	ProjectedBytes int64 `json:"projected_innodb_bytes"`
	// ExtraDiskBytes is the peak extra space: the old MyISAM copies are kept for rollback, so the
	// shadows of all tables add up, plus the binlog written by the largest copy.
	ExtraDiskBytes int64 `json:"extra_disk_bytes"`
}

// Var returns a global variable ("" when absent).
func (s *ServerInfo) Var(name string) string { return s.Variables[name] }

// VarOn reports whether a boolean variable is ON/1.
func (s *ServerInfo) VarOn(name string) bool {
	v := strings.ToUpper(s.Variables[name])
	return v == "ON" || v == "1" || v == "YES" || v == "TRUE"
}

// VarInt returns a numeric variable, or def when absent or not a number.
func (s *ServerInfo) VarInt(name string, def int64) int64 {
	n, err := strconv.ParseInt(s.Variables[name], 10, 64)
	if err != nil {
		return def
	}
	return n
}

// MariaDB reports the flavor.
func (s *ServerInfo) MariaDB() bool { return s.Flavor == "mariadb" }

// AtLeast compares the server version with major.minor.patch.
func (s *ServerInfo) AtLeast(major, minor, patch int) bool {
	if s.major != major {
		return s.major > major
	}
	if s.minor != minor {
		return s.minor > minor
	}
	return s.patch >= patch
}

var versionRe = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

// setVersion parses "10.11.19-MariaDB-0+deb12u1-log" or "8.0.36".
func (s *ServerInfo) setVersion(v string) {
	s.Version = v
	s.Flavor = "mysql"
	if dbconn.MariaDB(v) {
		s.Flavor = "mariadb"
	}
	if m := versionRe.FindStringSubmatch(v); m != nil {
		s.major, _ = strconv.Atoi(m[1])
		s.minor, _ = strconv.Atoi(m[2])
		s.patch, _ = strconv.Atoi(m[3])
	}
}

// serverVariables are the globals the checks read.
var serverVariables = []string{
	"version", "hostname", "datadir", "log_bin", "binlog_expire_logs_seconds", "expire_logs_days", "binlog_format", "binlog_row_image", "binlog_row_metadata",
	"innodb_buffer_pool_size", "key_buffer_size", "innodb_file_per_table", "innodb_strict_mode",
	"enforce_gtid_consistency", "gtid_mode", "innodb_flush_log_at_trx_commit", "sync_binlog",
	"innodb_page_size", "innodb_default_row_format", "sql_require_primary_key", "innodb_force_primary_key",
	"sql_generate_invisible_primary_key", "ft_min_word_len", "ft_max_word_len", "ft_stopword_file",
	"innodb_ft_min_token_size", "innodb_ft_max_token_size", "innodb_ft_enable_stopword",
	"performance_schema", "lower_case_table_names", "read_only", "myisam_use_mmap", "innodb_autoinc_lock_mode",
	"wsrep_on", "wsrep_cluster_name", "wsrep_osu_method", "log_bin_trust_function_creators", "max_user_connections",
}

var serverStatus = []string{"Com_lock_tables", "Com_rollback", "Com_begin", "Com_commit",
	"Delayed_writes", "Table_locks_waited", "Table_locks_immediate", "Uptime"}

// LoadServer reads the server facts every check needs. It only reads.
func LoadServer(ctx context.Context, q Querier) (*ServerInfo, error) { return loadServer(ctx, q, nil) }

// loadServer is LoadServer with the digests taken from cat where it shares them.
func loadServer(ctx context.Context, q Querier, cat *Catalog) (*ServerInfo, error) {
	s := &ServerInfo{Variables: map[string]string{}, Status: map[string]int64{}, FreeDiskBytes: -1}
	if err := readNameValues(ctx, q, "SHOW GLOBAL VARIABLES WHERE Variable_name IN "+inList(serverVariables), func(k, v string) {
		s.Variables[strings.ToLower(k)] = v
	}); err != nil {
		return nil, fmt.Errorf("read server variables: %w", err)
	}
	if err := readNameValues(ctx, q, "SHOW GLOBAL STATUS WHERE Variable_name IN "+inList(serverStatus), func(k, v string) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			s.Status[k] = n
		}
	}); err != nil {
		return nil, fmt.Errorf("read server status: %w", err)
	}
	s.setVersion(s.Variables["version"])
	s.Hostname = s.Variables["hostname"]
	if err := q.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&s.User); err != nil {
		return nil, fmt.Errorf("read current user: %w", err)
	}
	var err error
	if s.OwnLockTables, err = mdl.LockTablesSent(ctx, q); err != nil {
		return nil, fmt.Errorf("read server name: %w", err)
	}
	s.PerformanceSchema = s.VarOn("performance_schema")
	if s.PerformanceSchema && !cat.fillDigests(ctx, q, s) {
		s.loadDigests(ctx, q)
	}
	s.Grants, s.GrantsErr = loadGrants(ctx, q)
	s.Account = LoadAccount(ctx, q)
	s.Managed = loadManaged(ctx, q)
	s.readDisk(ctx, q)
	return s, nil
}

func readNameValues(ctx context.Context, q Querier, query string, f func(k, v string)) error {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		f(k, v)
	}
	return rows.Err()
}

func inList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return "(" + strings.Join(q, ",") + ")"
}

// readDisk reads the free space of the server's file systems where it can be seen (diskspace.Detect:
// statfs when plan runs on the database host, else information_schema.DISKS).
func (s *ServerInfo) readDisk(ctx context.Context, q Querier) {
	src, why := diskspace.Detect(ctx, q)
	if src == nil {
		s.DiskUnseen = why
		return
	}
	fss, err := src.Read(ctx)
	if err != nil {
		s.DiskUnseen = err.Error()
		return
	}
	s.Disk, s.DiskSource = fss, src.Name()
	if f, ok := s.fsOf(diskspace.RoleDatadir); ok {
		s.FreeDiskBytes = int64(f.Free)
	}
}

// fsOf is the file system that plays role, when known.
func (s *ServerInfo) fsOf(role string) (diskspace.FS, bool) {
	for _, f := range s.Disk {
		if slices.Contains(f.Roles, role) {
			return f, true
		}
	}
	return diskspace.FS{}, false
}

// binlogRetention says how long the server keeps binlogs, in words.
func (s *ServerInfo) binlogRetention() string {
	if secs := s.VarInt("binlog_expire_logs_seconds", 0); secs > 0 {
		return fmt.Sprintf("kept %s after it is written (binlog_expire_logs_seconds)", time.Duration(secs)*time.Second)
	}
	if days := s.VarInt("expire_logs_days", 0); days > 0 {
		return fmt.Sprintf("kept %d days after it is written (expire_logs_days)", days)
	}
	return "kept until purged (no binlog expiry is set)"
}
