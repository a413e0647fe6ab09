package plan

import "fmt"

func init() {
	register(Check{ID: "disk", Severity: Blocker, Scope: ScopeTable,
		What:   "free space on the datadir for the InnoDB copy, the binlog it writes and index builds; old MyISAM tables are kept for rollback, so conversions add up",
		table:  checkTableDisk,
		server: checkServerDisk})
	registerServer("buffer-pool", Warning, "innodb_buffer_pool_size is smaller than the InnoDB data after migration (key_buffer_size can shrink)", checkBufferPool)
}

func checkTableDisk(in *TableInput) []Finding {
	if in.Server == nil || in.Estimate == nil || in.Server.FreeDiskBytes < 0 {
		return nil
	}
	need, free := in.Estimate.ExtraDiskBytes, in.Server.FreeDiskBytes
	if free >= need {
		return nil
	}
	return []Finding{newFinding("disk", Blocker,
		fmt.Sprintf("the copy needs about %s (shadow %s, binlog %s, index build) but only %s is free on the datadir", human(need), human(in.Estimate.ProjectedBytes), human(in.Estimate.BinlogBytes), human(free)),
		"free disk space (drop old _<t>_old tables of earlier conversions, purge binlogs already on every replica) and plan again")}
}

func checkServerDisk(s *ServerInfo) []Finding {
	if s.Totals == nil || s.Totals.Tables == 0 {
		return nil
	}
	need := s.Totals.ExtraDiskBytes
	if s.FreeDiskBytes < 0 {
		return []Finding{newFinding("disk", Info,
			fmt.Sprintf("converting all planned tables needs about %s extra disk (old MyISAM copies are kept until dropped); free space is unknown because plan does not run on the database host", human(need)),
			"check free space on the datadir's file system (and on replicas, for relay logs) yourself")}
	}
	free := s.FreeDiskBytes
	switch {
	case free < need:
		return []Finding{newFinding("disk", Warning,
			fmt.Sprintf("converting all planned tables needs about %s extra disk, only %s is free: tables that fit alone may not fit together", human(need), human(free)),
			"convert in batches and drop each _<t>_old table once the conversion is confirmed, or add disk; replicas need room for relay logs too")}
	case float64(free) < 1.5*float64(need):
		return []Finding{newFinding("disk", Warning,
			fmt.Sprintf("converting all planned tables needs about %s extra disk of %s free: little headroom", human(need), human(free)),
			"watch the disk during apply; replicas need room for relay logs too")}
	}
	return []Finding{newFinding("disk", Info,
		fmt.Sprintf("converting all planned tables needs about %s extra disk; %s free", human(need), human(free)), "")}
}

func checkBufferPool(s *ServerInfo) []Finding {
	if s.Totals == nil || s.Totals.ProjectedBytes == 0 {
		return nil
	}
	pool := s.VarInt("innodb_buffer_pool_size", -1)
	if pool < 0 || pool >= s.Totals.ProjectedBytes {
		return nil
	}
	return []Finding{newFinding("buffer-pool", Warning,
		fmt.Sprintf("innodb_buffer_pool_size is %s but the converted tables alone will take about %s: reads that hit the OS cache today may go to disk", human(pool), human(s.Totals.ProjectedBytes)),
		fmt.Sprintf("raise innodb_buffer_pool_size (dynamic since MySQL 5.7 / MariaDB 10.2) and lower key_buffer_size (now %s) as MyISAM tables go away", human(s.VarInt("key_buffer_size", 0))))}
}

// human prints a byte count in binary units.
func human(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
