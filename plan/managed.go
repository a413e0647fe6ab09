package plan

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Managed is what plan knows of a managed service from the procedures it offers in place of the
// privileges its accounts lack. Amazon RDS and Aurora for MySQL and MariaDB keep their settings in
// mysql.rds_set_configuration / mysql.rds_show_configuration; among them how long binlogs are
// kept, which replaces the server's expiry there (NULL, the default: purged as soon as possible).
type Managed struct {
	Service string `json:"service"`
	// BinlogRetentionHours is 'binlog retention hours' (-1: NULL, none kept past their use).
	BinlogRetentionHours int `json:"binlog_retention_hours"`
}

// loadManaged recognises a managed service by its procedures (nil: none recognised, or the
// account cannot see them).
func loadManaged(ctx context.Context, q Querier) *Managed {
	var n int
	if q.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.ROUTINES
		WHERE ROUTINE_SCHEMA = 'mysql' AND ROUTINE_NAME = 'rds_show_configuration'`).Scan(&n) != nil || n == 0 {
		return nil
	}
	m := &Managed{Service: "Amazon RDS", BinlogRetentionHours: -1}
	rows, err := q.QueryContext(ctx, "CALL mysql.rds_show_configuration")
	if err != nil {
		return m
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(cols) < 2 || rows.Scan(ptrs...) != nil {
			break
		}
		if strings.EqualFold(vals[0].String, "binlog retention hours") && vals[1].Valid {
			if h, err := strconv.Atoi(vals[1].String); err == nil {
				m.BinlogRetentionHours = h
			}
		}
	}
	return m
}

func init() {
	registerServer("managed-binlog-retention", Warning, "a managed server (Amazon RDS, Aurora) whose 'binlog retention hours' is NULL or under a day: binlog capture's resume and rollback need the binlog from their positions on", checkManagedRetention)
}

// minRetentionHours is the least binlog retention plan accepts without a warning on a managed
// server: a run interrupted at night resumes in the morning, and rollback replays the binlog from
// the cut-over on.
const minRetentionHours = 24

func checkManagedRetention(s *ServerInfo) []Finding {
	m := s.Managed
	if m == nil || m.BinlogRetentionHours >= minRetentionHours {
		return nil
	}
	if mode, _, err := ChooseCapture(s, s.WantCapture); err != nil || mode != CaptureBinlog {
		return nil
	}
	kept := "NULL (binlogs are purged as soon as they are no longer needed by the service)"
	if m.BinlogRetentionHours >= 0 {
		kept = fmt.Sprintf("%d hours", m.BinlogRetentionHours)
	}
	return []Finding{newFinding("managed-binlog-retention", Warning,
		m.Service+": 'binlog retention hours' is "+kept+"; binlog capture reads the binlog while it runs, but an interrupted apply resumes, and rollback replays the application's writes since the cut-over, from the binlog at their recorded positions: once purged, neither can",
		"CALL mysql.rds_set_configuration('binlog retention hours', 168); -- a week: the run, a resume, and your rollback window (the binlogs use storage meanwhile)")}
}
