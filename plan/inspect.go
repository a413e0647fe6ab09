package plan

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/table"
)

// Errors the CLI turns into usage errors.
var (
	ErrUnknownDatabase = errors.New("unknown database")
	ErrSystemSchema    = errors.New("system schemas are never planned")
	ErrNoMatch         = errors.New("no table matches")
)

// systemSchemas hold the server's own tables; converting them breaks the server.
var systemSchemas = map[string]bool{"mysql": true, "sys": true, "performance_schema": true, "information_schema": true}

// Options choose what Inspect looks at.
type Options struct {
	// Databases to plan (at least one).
	Databases []string
	// Tables are names or shell patterns (*, ?, [..]), optionally qualified as db.table; empty
	// means every MyISAM table of the databases.
	Tables []string
	// TestCompile creates each proposed InnoDB table under a scratch name and drops it again.
	TestCompile bool
	// SampleRows is how many rows to read per table to measure the copy rate (0: DefaultSampleRows).
	SampleRows int64
	// Tool is recorded in the plan (enginemig's version).
	Tool string
	// Capture is the capture apply will be asked to use (auto, binlog, triggers; "" is auto).
	Capture string
	// Nodes are the SQL addresses (host:port) of a Galera cluster's nodes, for the per-node row
	// counts; empty means the addresses the cluster reports (wsrep_incoming_addresses).
	Nodes []string
	// OpenNode connects to another node of a Galera cluster; nil leaves the other nodes unread.
	OpenNode NodeOpener
	// MaxHold: see ServerInfo.MaxHold.
	MaxHold time.Duration
	// ApplyConnections: see ServerInfo.ApplyConnections.
	ApplyConnections int
	// Logger gets Debug records of the work (tables found, each table planned); nil discards.
	Logger *slog.Logger
}

// Inspect plans the conversion of the MyISAM tables that opts select. It reads only, except for
// the test-compile's scratch table when opts.TestCompile is set. It holds two connections of db's
// pool at once (reads, and the test-compile session), so the pool must allow at least two.
func Inspect(ctx context.Context, db *sql.DB, opts Options) (*Plan, error) {
	if len(opts.Databases) == 0 {
		return nil, fmt.Errorf("plan: no database given")
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan: connect: %w", err)
	}
	defer discard(conn)
	freshStatistics(ctx, conn)
	srv, err := LoadServer(ctx, conn)
	if err != nil {
		return nil, err
	}
	srv.WantCapture, srv.MaxHold, srv.ApplyConnections = opts.Capture, opts.MaxHold, opts.ApplyConnections
	p := &Plan{Version: FormatVersion, GeneratedAt: time.Now().UTC(), Tool: opts.Tool, Server: srv,
		Databases: opts.Databases, TestCompile: opts.TestCompile, Findings: []Finding{}, Tables: []TablePlan{}}
	cands, skipped, err := discover(ctx, conn, opts)
	if err != nil {
		return nil, err
	}
	p.Skipped = skipped
	if srv.VarOn("wsrep_on") {
		if srv.Galera, err = loadGalera(ctx, conn, srv, opts.Nodes); err != nil {
			return nil, err
		}
		srv.Galera.countRows(ctx, conn, opts.OpenNode, cands)
	}
	cat, err := LoadCatalog(ctx, conn)
	if err != nil {
		return nil, err
	}
	// compileQ stays a nil interface (not a typed nil) when the test-compile is off.
	var compileQ Querier
	if opts.TestCompile {
		compileConn, err := db.Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("plan: connect for test-compile: %w", err)
		}
		defer discard(compileConn)
		compileQ = compileConn
		if srv.TestCompileBinlogged, err = compileSession(ctx, compileConn); err != nil {
			return nil, err
		}
	}
	logger := dbconn.Logger(opts.Logger)
	logger.Debug("plan: tables found", slog.Int("myisam", len(cands)), slog.Int("skipped", len(skipped)), slog.Bool("test_compile", opts.TestCompile))
	if err := p.planTables(ctx, conn, compileQ, cat, cands, opts.SampleRows, logger); err != nil {
		return nil, err
	}
	p.RankedBy = rankTables(p.Tables)
	p.addServerFindings(opts)
	sortFindings(p.Findings)
	p.Summary.add(p.Findings)
	for _, t := range p.Tables {
		p.Summary.add(t.Findings)
	}
	return p, nil
}

// planTables plans each candidate table, with its contention and locking statements, and adds
// its estimate to the totals.
func (p *Plan) planTables(ctx context.Context, conn *sql.Conn, compileQ Querier, cat *Catalog, cands []candidate, sampleRows int64, logger *slog.Logger) error {
	contention := loadContention(ctx, conn, p.Databases)
	var binlogs int64
	for _, c := range cands {
		start := time.Now()
		tp, err := planTable(ctx, conn, compileQ, p.Server, cat, c, sampleRows)
		if err != nil {
			return err
		}
		logger.Debug("plan: table planned", slog.String("table", c.schema+"."+c.name), slog.Int64("rows", tp.Rows),
			slog.Int("findings", len(tp.Findings)), slog.Bool("blocked", tp.Blocked), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
		if ct := contention[c.schema+"."+c.name]; ct != nil {
			tp.Contention = *ct
		}
		tp.Contention.Statements = lockStatements(p.Server.Digests, c.schema, c.name)
		p.Tables = append(p.Tables, *tp)
		p.Totals.add(tp.Estimate)
		binlogs += tp.Estimate.BinlogBytes
	}
	// Old MyISAM tables are kept for rollback, so every shadow stays; so does every copy's
	// binlog, until the server expires it or someone purges it (days, or never, while the
	// conversions take hours).
	p.Totals.ExtraDiskBytes += binlogs
	p.Server.Totals = &p.Totals
	return nil
}

// addServerFindings adds the findings on the server and on each database as a whole.
func (p *Plan) addServerFindings(opts Options) {
	srv := p.Server
	p.Findings = append(p.Findings, runServerChecks(srv)...)
	if srv.TestCompileBinlogged && opts.TestCompile && len(p.Tables) > 0 {
		p.Findings = append(p.Findings, newFinding("shadow-compile", Info,
			"the account may not set sql_log_bin=0, so the test-compile's CREATE/DROP of scratch tables went to the binlog (replicas replayed them)",
			"grant BINLOG ADMIN (MariaDB) / SYSTEM_VARIABLES_ADMIN (MySQL) or use --no-test-compile"))
	}
	for _, schema := range opts.Databases {
		p.Findings = append(p.Findings, runSchemaChecks(&SchemaInput{Schema: schema, Server: srv})...)
	}
}

func (t *Totals) add(e Estimate) {
	t.Tables++
	t.Rows += e.Rows
	t.DataBytes += e.DataBytes
	t.IndexBytes += e.IndexBytes
	t.ProjectedBytes += e.ProjectedBytes
	t.ExtraDiskBytes += e.ProjectedBytes
}

// candidate is a table discover selected.
type candidate struct {
	schema, name, engine string
	// crashed holds the server's comment when the table cannot be opened.
	crashed string
}

// discover lists MyISAM (and MERGE, and unopenable) base tables of the selected databases.
func discover(ctx context.Context, q Querier, opts Options) ([]candidate, []Skipped, error) {
	var out []candidate
	var skipped []Skipped
	for _, schema := range opts.Databases {
		if systemSchemas[strings.ToLower(schema)] {
			return nil, nil, fmt.Errorf("%w: %s", ErrSystemSchema, schema)
		}
		var n int
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", schema).Scan(&n); err != nil {
			return nil, nil, fmt.Errorf("look up database %s: %w", schema, err)
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("%w %q", ErrUnknownDatabase, schema)
		}
		rows, err := q.QueryContext(ctx, `SELECT TABLE_NAME, COALESCE(ENGINE, ''), COALESCE(TABLE_COMMENT, '')
			FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME`, schema)
		if err != nil {
			return nil, nil, fmt.Errorf("list tables of %s: %w", schema, err)
		}
		all := map[string]bool{}
		var found []candidate
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.name, &c.engine, &c.crashed); err != nil {
				rows.Close()
				return nil, nil, err
			}
			c.schema = schema
			all[c.name] = true
			found = append(found, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
		for _, c := range found {
			if !selected(opts.Tables, schema, c.name) {
				continue
			}
			switch {
			case isWorkingTable(c.name, all):
				skipped = append(skipped, Skipped{schema, c.name, "enginemig working table (shadow, kept old table or test-compile scratch)"})
			case c.engine == "":
				// The server cannot open it: the crashed check reports the server's comment.
				if c.crashed == "" {
					c.crashed = "information_schema shows no engine for it"
				}
				out = append(out, c)
			case strings.EqualFold(c.engine, "MyISAM") || strings.EqualFold(c.engine, "MRG_MyISAM"):
				c.crashed = ""
				out = append(out, c)
			case len(opts.Tables) > 0:
				skipped = append(skipped, Skipped{schema, c.name, "engine is " + c.engine + ", not MyISAM"})
			}
		}
	}
	if len(opts.Tables) > 0 && len(out) == 0 && len(skipped) == 0 {
		return nil, nil, fmt.Errorf("%w %s in %s", ErrNoMatch, strings.Join(opts.Tables, ", "), strings.Join(opts.Databases, ", "))
	}
	return out, skipped, nil
}

var (
	workingRe   = regexp.MustCompile(`^_(.+)_(new|old)$`)
	changeLogRe = regexp.MustCompile(`^(.+)_em(chg|chb)$`)
)

// isWorkingTable recognises apply's _<t>_new/_<t>_old and trigger capture's change logs
// <t>_emchg/<t>_emchb next to <t>, and plan's scratch tables.
func isWorkingTable(name string, all map[string]bool) bool {
	if strings.HasPrefix(name, "_enginemig_plan_") {
		return true
	}
	for _, re := range []*regexp.Regexp{workingRe, changeLogRe} {
		if m := re.FindStringSubmatch(name); m != nil && all[m[1]] {
			return true
		}
	}
	return false
}

// selected matches a table against the --tables names/patterns (all when none are given).
func selected(patterns []string, schema, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		s, t, qualified := strings.Cut(p, ".")
		if !qualified {
			s, t = "*", p
		}
		okSchema, _ := path.Match(s, schema)
		okName, _ := path.Match(t, name)
		if okSchema && okName {
			return true
		}
	}
	return false
}

// planTable loads one table, gathers its facts, test-compiles and estimates it, runs the checks.
func planTable(ctx context.Context, q Querier, compileQ Querier, srv *ServerInfo, cat *Catalog, c candidate, sample int64) (*TablePlan, error) {
	info, err := loadInfo(ctx, q, c)
	if msg, broken := tableOpenError(err); broken {
		// information_schema may still show ENGINE=MyISAM for a damaged table until something
		// tries to open its files; SHOW CREATE TABLE does.
		c.crashed = msg
		info, err = loadInfo(ctx, q, c)
	}
	if err != nil {
		return nil, err
	}
	in, err := gatherTable(ctx, q, srv, cat, info, c.crashed)
	if err != nil {
		return nil, err
	}
	tp := &TablePlan{Schema: c.schema, Table: c.name, Engine: info.Engine, Rows: info.Rows}
	if key, ok := info.CopyKey(); ok {
		tp.CopyKey = key.Name
	}
	usable := c.crashed == "" && strings.EqualFold(info.Engine, "MyISAM")
	if usable {
		tp.Estimate = estimateSizes(info, srv.VarOn("log_bin"))
		parallel, _ := ParallelCopy(srv.MariaDB(), srv.VarInt("innodb_autoinc_lock_mode", 1), info)
		if err := measureCopy(ctx, q, info, sample, parallel, &tp.Estimate); err != nil {
			msg, broken := tableOpenError(err)
			if !broken {
				return nil, err
			}
			in.Crashed = msg
		}
		in.Estimate = &tp.Estimate
		if compileQ != nil {
			if in.Compile, err = testCompile(ctx, compileQ, info, in.Triggers, table.RowIDSupported(srv.Version)); err != nil {
				return nil, err
			}
		}
	}
	tp.Findings = runTableChecks(in)
	tp.Blocked = len(Blockers(tp.Findings)) > 0
	if tp.Findings == nil {
		tp.Findings = []Finding{}
	}
	return tp, nil
}

// loadInfo reads the table; a table the server cannot open gets a description by name only.
func loadInfo(ctx context.Context, q Querier, c candidate) (*table.Info, error) {
	if c.crashed != "" {
		return &table.Info{Schema: c.schema, Name: c.name, Type: "BASE TABLE"}, nil
	}
	info, err := table.Load(ctx, q, c.schema, c.name)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return info, nil
}

// tableOpenError recognises the errors MyISAM gives for a damaged table (crashed, bad file
// format, unreadable key file), which are findings, not failures of plan.
func tableOpenError(err error) (string, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return "", false
	}
	switch me.Number {
	case 126, 127, 130, 132, 134, 135, 136, 137, 141, 144, 145, 1016, 1017, 1030, 1034, 1035, 1194, 1195:
		return fmt.Sprintf("Error %d: %s", me.Number, me.Message), true
	}
	return "", false
}

// freshStatistics asks MySQL 8.0+ for current sizes and AUTO_INCREMENT values (information_schema
// caches them for a day by default). MariaDB has no such cache and no such variable.
func freshStatistics(ctx context.Context, q Querier) {
	q.ExecContext(ctx, "SET SESSION information_schema_stats_expiry = 0")
}

// discard closes a connection instead of returning it to the pool, so session settings made for
// plan (sql_log_bin=0 above all) can never leak into a caller's later statements.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// CheckTable runs every table-level and database-level check on one table, test-compile
// included, as apply's preflight does, against srv as CheckServer read it (read once, not again
// for the table: apply's preflight of each table of a whole-database run competes with the
// application for the server). The table need not be MyISAM (apply may call it on a table that
// was converted meanwhile; the caller decides what that means). It returns the findings and the
// copy's estimate (its sample read, the one `enginemig plan` makes; zero for a table that is not
// MyISAM). cat is the run's Catalog (nil: read here). Like Inspect it holds two connections of
// db's pool at once.
func CheckTable(ctx context.Context, db *sql.DB, srv *ServerInfo, cat *Catalog, schema, name string, maxHold time.Duration) ([]Finding, Estimate, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, Estimate{}, fmt.Errorf("check %s.%s: connect: %w", schema, name, err)
	}
	defer discard(conn)
	freshStatistics(ctx, conn)
	s := *srv
	s.MaxHold = maxHold
	if cat == nil {
		if cat, err = LoadCatalog(ctx, conn); err != nil {
			return nil, Estimate{}, err
		}
	}
	c := candidate{schema: schema, name: name}
	var engine, comment sql.NullString
	err = conn.QueryRowContext(ctx, `SELECT ENGINE, TABLE_COMMENT FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, schema, name).Scan(&engine, &comment)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, Estimate{}, fmt.Errorf("check %s.%s: %w", schema, name, table.ErrNotFound)
	}
	if err != nil {
		return nil, Estimate{}, fmt.Errorf("check %s.%s: %w", schema, name, err)
	}
	if !engine.Valid {
		c.crashed = comment.String
	}
	compileConn, err := db.Conn(ctx)
	if err != nil {
		return nil, Estimate{}, fmt.Errorf("check %s.%s: connect for test-compile: %w", schema, name, err)
	}
	defer discard(compileConn)
	if s.TestCompileBinlogged, err = compileSession(ctx, compileConn); err != nil {
		return nil, Estimate{}, err
	}
	tp, err := planTable(ctx, conn, compileConn, &s, cat, c, 0)
	if err != nil {
		return nil, Estimate{}, err
	}
	fs := append(tp.Findings, runSchemaChecks(&SchemaInput{Schema: schema, Server: &s})...)
	sortFindings(fs)
	return fs, tp.Estimate, nil
}

// CheckServer runs the server-level checks (binlog, configuration, global privileges, the
// account's limits against apply's applyConnections) and
// returns them with the server as it read it (for CheckGalera). The capacity checks that need
// all planned tables' totals are left to Inspect. cat, when it shares the statement digests
// (Catalog.ShareDigests), gives them instead of a reading of its own; nil reads them.
func CheckServer(ctx context.Context, db *sql.DB, capture string, applyConnections int, cat *Catalog) (*ServerInfo, []Finding, error) {
	srv, err := loadServer(ctx, db, cat)
	if err != nil {
		return nil, nil, err
	}
	srv.WantCapture, srv.ApplyConnections = capture, applyConnections
	return srv, runServerChecks(srv), nil
}
