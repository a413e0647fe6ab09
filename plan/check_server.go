package plan

import (
	"errors"
	"fmt"
	"strings"
)

func init() {
	registerServer("binlog", Blocker, "how apply captures changes: from a ROW binlog, or with triggers (--capture auto|binlog|triggers); blocks when the chosen capture cannot work", checkBinlog)
	registerServer("binlog-metadata", Info, "binlog_row_metadata not FULL: column names then come from information_schema, and DDL during a run is refused", checkBinlogMetadata)
	registerServer("file-per-table", Warning, "innodb_file_per_table=OFF: converted tables grow the shared ibdata file, which never shrinks", checkFilePerTable)
	registerServer("strict-mode", Info, "innodb_strict_mode=OFF: enginemig turns it on for its own sessions so bad table options fail loudly", checkStrictMode)
	registerServer("gtid-consistency", Warning, "enforce_gtid_consistency=ON: statements that touch MyISAM and InnoDB tables together fail (error 1785)", checkGTIDConsistency)
	registerServer("myisam-mmap", Info, "myisam_use_mmap=OFF: the copy and verification read every MyISAM row by key with a system call of its own; memory-mapped, apply was about 1.3x faster idle and 1.5x under load", checkMyISAMMmap)
	registerServer("mysql-metadata-locks", Blocker, "MySQL: the cut-over sees its rename queued on the table in performance_schema.metadata_locks, which needs performance_schema on and SELECT on it", checkMySQLMetadataLocks)
	registerServer("statement-binlog", Warning, "binlog_format STATEMENT or MIXED: a KILL (or a statement time limit) of enginemig's writes into MyISAM stops every replica", checkStatementBinlog)
	registerServer("performance-schema", Info, "performance_schema OFF (MariaDB's default, and most hosts'): what apply and plan do without it", checkPerformanceSchema)
	registerServer("durability", Info, "innodb_flush_log_at_trx_commit=1: every autocommit write waits for an fsync; InnoDB can be slower than MyISAM on slow disks", checkDurability)
}

func checkBinlog(s *ServerInfo) []Finding {
	mode, why, err := ChooseCapture(s, s.WantCapture)
	refusal := (*CaptureRefusal)(nil)
	switch {
	case errors.As(err, &refusal):
		return []Finding{newFinding("binlog", Blocker, "apply cannot capture the table's changes: "+err.Error(), refusal.Remedy())}
	case err != nil:
		return []Finding{newFinding("binlog", Blocker, "apply cannot capture the table's changes: "+err.Error(), "use --capture auto, binlog or triggers")}
	case mode == CaptureTriggers:
		return []Finding{newFinding("binlog", Info,
			"apply captures changes with triggers ("+why+"): each write to a table under conversion also notes its key in a MyISAM change log, "+CaptureCostPerWrite+" a row",
			"nothing to do; binlog capture (log_bin, binlog_format=ROW, binlog_row_image=FULL) adds no cost to the application's writes")}
	}
	return nil
}

// checkMySQLMetadataLocks: on MySQL, which has no NOWAIT for LOCK TABLES, the cut-over learns that
// its rename waits behind its lock from performance_schema.metadata_locks; without it every attempt
// fails after the copy (seen with a managed account and performance_schema off), so apply refuses
// before it starts.
func checkMySQLMetadataLocks(s *ServerInfo) []Finding {
	if s.MariaDB() || s.Galera != nil || s.Var("version") == "" {
		return nil
	}
	var why []string
	if !s.PerformanceSchema {
		why = append(why, "performance_schema is OFF")
	}
	if s.Grants != nil && !s.Grants.Has("SELECT", "performance_schema", "") {
		why = append(why, "the account lacks SELECT on performance_schema")
	}
	if len(why) == 0 {
		return nil
	}
	return []Finding{newFinding("mysql-metadata-locks", Blocker,
		"the cut-over cannot see its rename queued behind its lock ("+strings.Join(why, ", ")+"): on MySQL it reads performance_schema.metadata_locks, and every attempt would fail after the copy",
		"turn performance_schema on (performance_schema=ON in the config file or, on a managed server, its parameter group; needs a restart) and GRANT SELECT ON performance_schema.* TO <enginemig account>")}
}

// checkStatementBinlog: an interrupted write into a non-transactional table keeps part of its
// effect and is binlogged with its error; replicas applying statements refuse it and stop.
// enginemig never interrupts its own such writes (dbconn.ExecWhole); someone else may.
func checkStatementBinlog(s *ServerInfo) []Finding {
	f := strings.ToUpper(s.Var("binlog_format"))
	if !s.VarOn("log_bin") || (f != "STATEMENT" && f != "MIXED") {
		return nil
	}
	return []Finding{newFinding("statement-binlog", Warning,
		"binlog_format="+f+": a write into a MyISAM table that is interrupted keeps part of its effect, and replicas stop on it "+
			"('Query partially completed on the master'); enginemig never interrupts its own (the change log's, the copy's stage, "+
			"and in a rollback the MyISAM original's), but a KILL or a statement time limit (max_statement_time) would, and apply "+
			"or rollback then stops saying so",
		"do not KILL enginemig's sessions during a run (stop it with Ctrl-C, `enginemig control abort` or its timeouts, which "+
			"wait for a statement's end), and keep statement limits off its account; binlog_format=ROW avoids it and lets apply use binlog capture")}
}

func checkBinlogMetadata(s *ServerInfo) []Finding {
	m := s.Var("binlog_row_metadata")
	if !s.VarOn("log_bin") || strings.EqualFold(m, "FULL") {
		return nil
	}
	if m == "" {
		m = "not supported"
	}
	return []Finding{newFinding("binlog-metadata", Info,
		"binlog_row_metadata="+m+": row events carry no column names, so apply maps columns from information_schema and refuses DDL on the table during a run",
		"optional: SET GLOBAL binlog_row_metadata=FULL (MySQL 8.0+, MariaDB 10.5+)")}
}

func checkFilePerTable(s *ServerInfo) []Finding {
	if v := s.Var("innodb_file_per_table"); v == "" || s.VarOn("innodb_file_per_table") {
		return nil
	}
	return []Finding{newFinding("file-per-table", Warning,
		"innodb_file_per_table=OFF: converted tables are stored in the shared ibdata1 file, which never gives space back (not even after dropping them)",
		"SET GLOBAL innodb_file_per_table=ON before apply (it applies to tables created afterwards)")}
}

func checkStrictMode(s *ServerInfo) []Finding {
	if v := s.Var("innodb_strict_mode"); v == "" || s.VarOn("innodb_strict_mode") {
		return nil
	}
	return []Finding{newFinding("strict-mode", Info,
		"innodb_strict_mode=OFF on the server: enginemig sets it ON in its own sessions, so the shadow is checked strictly (other sessions are unaffected)",
		"nothing to do")}
}

func checkGTIDConsistency(s *ServerInfo) []Finding {
	v := strings.ToUpper(s.Var("enforce_gtid_consistency"))
	if v != "ON" && v != "1" && v != "WARN" {
		return nil
	}
	return []Finding{newFinding("gtid-consistency", Warning,
		"enforce_gtid_consistency="+v+": while some tables are MyISAM and others InnoDB, a transaction or CREATE ... SELECT that writes both fails (error 1785)",
		"find statements that write MyISAM and InnoDB tables in one transaction and convert those tables together, or in the order the application needs")}
}

func checkDurability(s *ServerInfo) []Finding {
	if s.Var("innodb_flush_log_at_trx_commit") != "1" {
		return nil
	}
	return []Finding{newFinding("durability", Info,
		fmt.Sprintf("innodb_flush_log_at_trx_commit=1 (sync_binlog=%s): every autocommit write to InnoDB waits for a log fsync, which MyISAM never does; on slow fsync InnoDB can be slower for write-heavy tables", orDash(s.Var("sync_binlog"))),
		"run enginemig bench with the production mix (or apply's benchmark gate) before converting write-heavy tables")}
}

// checkMyISAMMmap: reading a MyISAM row by key (the copy's and verification's key ranges) is one
// pread of the data file unless the file is memory-mapped; a table scan reads through a buffer.
// Mapped, a key-ordered read is several times faster, and so is the whole apply
// (docs/bench/constants.md). enginemig does not set it itself: it is global, and takes effect
// for a table only when the table is next opened.
func checkMyISAMMmap(s *ServerInfo) []Finding {
	if v := strings.ToUpper(s.Var("myisam_use_mmap")); v != "OFF" && v != "0" {
		return nil
	}
	return []Finding{newFinding("myisam-mmap", Info,
		"myisam_use_mmap=OFF: the copy and verification read every MyISAM row by key with a system call of its own; with the data file memory-mapped, apply converted 1M rows about 1.3x faster idle and 1.5x faster under load",
		"SET GLOBAL myisam_use_mmap=ON (and in my.cnf) before apply; it applies to a table when it is next opened, e.g. FLUSH TABLES db.t at a quiet moment (rows appended after that are still read with preads)")}
}

// WithoutPerformanceSchema says what plan and apply see less of with performance_schema off, or ""
// when it is on. Every stage works without it; apply logs this once, plan reports it.
func WithoutPerformanceSchema(s *ServerInfo) string {
	if s.PerformanceSchema || s.Var("performance_schema") == "" {
		return ""
	}
	return "the answers check has no application statements to run (it reads them from performance_schema's statement history: give --answers FILE with the application's reads); " +
		"plan ranks tables by lock waits only from server-wide counters; " +
		"a lock wait names its holder from the process list, as a guess (MariaDB: INSTALL SONAME 'metadata_lock_info' names it exactly); " +
		"the cut-over judges long statements by the process list; " +
		"the benchmark gates' --mix auto cannot read the table's statement mix (give --mix)"
}

func checkPerformanceSchema(s *ServerInfo) []Finding {
	without := WithoutPerformanceSchema(s)
	if without == "" {
		return nil
	}
	return []Finding{newFinding("performance-schema", Info, "performance_schema is OFF; every stage works without it, but "+without,
		"nothing to do; to get them, performance_schema=ON in the server's configuration (a restart; on a managed server its parameter group)")}
}
