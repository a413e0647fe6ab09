package plan

import (
	"fmt"
	"strings"
)

func init() {
	registerServer("binlog", Blocker, "log_bin off, binlog_format not ROW or binlog_row_image not FULL: apply reads row changes from the binlog", checkBinlog)
	registerServer("binlog-metadata", Info, "binlog_row_metadata not FULL: column names then come from information_schema, and DDL during a run is refused", checkBinlogMetadata)
	registerServer("file-per-table", Warning, "innodb_file_per_table=OFF: converted tables grow the shared ibdata file, which never shrinks", checkFilePerTable)
	registerServer("strict-mode", Info, "innodb_strict_mode=OFF: enginemig turns it on for its own sessions so bad table options fail loudly", checkStrictMode)
	registerServer("gtid-consistency", Warning, "enforce_gtid_consistency=ON: statements that touch MyISAM and InnoDB tables together fail (error 1785)", checkGTIDConsistency)
	registerServer("durability", Info, "innodb_flush_log_at_trx_commit=1: every autocommit write waits for an fsync; InnoDB can be slower than MyISAM on slow disks", checkDurability)
}

func checkBinlog(s *ServerInfo) []Finding {
	var problems []string
	if !s.VarOn("log_bin") {
		problems = append(problems, "log_bin is OFF")
	} else {
		if f := s.Var("binlog_format"); !strings.EqualFold(f, "ROW") {
			problems = append(problems, "binlog_format="+f+" (need ROW)")
		}
		if img := s.Var("binlog_row_image"); img != "" && !strings.EqualFold(img, "FULL") {
			problems = append(problems, "binlog_row_image="+img+" (need FULL)")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return []Finding{newFinding("binlog", Blocker,
		"apply follows the table's changes through the binlog, but "+strings.Join(problems, ", "),
		"set log_bin (needs a restart) and SET GLOBAL binlog_format=ROW, binlog_row_image=FULL (also in the config file); sessions opened earlier keep their format, so reconnect the application")}
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
