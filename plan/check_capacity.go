package plan

import (
	"fmt"

	"github.com/enginemig/enginemig/pace/diskspace"
)

func init() {
	register(Check{ID: "disk", Severity: Blocker, Scope: ScopeTable,
		What:   "free space on the datadir and binlog file systems for the InnoDB copy, the binlog it writes (kept until expired or purged) and index builds; old MyISAM tables are kept for rollback, so conversions add up",
		table:  checkTableDisk,
		server: checkServerDisk})
	registerServer("buffer-pool", Warning, "innodb_buffer_pool_size is smaller than the InnoDB data after migration (key_buffer_size can shrink)", checkBufferPool)
}

func checkTableDisk(in *TableInput) []Finding {
	if in.Server == nil || in.Estimate == nil || in.Server.FreeDiskBytes < 0 {
		return nil
	}
	e, s := in.Estimate, in.Server
	need, free := e.ExtraDiskBytes, s.FreeDiskBytes

	// The binlog on a file system of its own: the shadow and its index build go to the
	// datadir's, the copy's binlog to the binlog's.
	if d, ok := s.fsOf(diskspace.RoleDatadir); ok {
		if b, ok := s.fsOf(diskspace.RoleBinlog); ok && b.Mount != d.Mount {
			need -= e.BinlogBytes
			if int64(b.Free) < e.BinlogBytes {
				return []Finding{newFinding("disk", Blocker,
					fmt.Sprintf("the copy writes about %s of binlog, %s, but only %s is free on the binlog's file system (%s)", Human(e.BinlogBytes), s.binlogRetention(), Human(int64(b.Free)), b.Mount),
					"purge binlogs already on every replica, or add space to the binlog's file system, and plan again")}
			}
		}
	}
	if free >= need {
		return nil
	}
	return []Finding{newFinding("disk", Blocker,
		fmt.Sprintf("the copy needs about %s (shadow %s, binlog %s %s, index build) but only %s is free on %s", Human(need), Human(e.ProjectedBytes), Human(e.BinlogBytes), s.binlogRetention(), Human(free), "the datadir"),
		"free disk space (drop old _<t>_old tables of earlier conversions, purge binlogs already on every replica) and plan again")}
}

// diskUnseen is what plan cannot see of the disk, for every disk finding.
const diskUnseen = "plan cannot see what else will write to these file systems meanwhile (the application, backups, logs), nor the replicas' disks (relay logs); apply keeps --disk-reserve free and waits under it"

func checkServerDisk(s *ServerInfo) []Finding {
	if s.Totals == nil || s.Totals.Tables == 0 {
		return nil
	}
	need := s.Totals.ExtraDiskBytes
	if s.FreeDiskBytes < 0 {
		why := s.DiskUnseen
		if why == "" {
			why = "plan does not run on the database host"
		}
		return []Finding{newFinding("disk", Info,
			fmt.Sprintf("converting all planned tables needs about %s extra disk (old MyISAM copies are kept until dropped; every copy's binlog is %s); free space is unknown: %s", Human(need), s.binlogRetention(), why),
			"check free space on the datadir's and the binlog's file systems (and on replicas, for relay logs) yourself; on MariaDB, INSTALL SONAME 'disks' and GRANT FILE let plan and apply read it; "+diskUnseen)}
	}
	free := s.FreeDiskBytes
	switch {
	case free < need:
		return []Finding{newFinding("disk", Warning,
			fmt.Sprintf("converting all planned tables needs about %s extra disk (every copy's binlog %s), only %s is free: tables that fit alone may not fit together", Human(need), s.binlogRetention(), Human(free)),
			"convert in batches, drop each _<t>_old table once the conversion is confirmed and purge binlogs already on every replica between batches, or add disk; "+diskUnseen)}
	case float64(free) < 1.5*float64(need):
		return []Finding{newFinding("disk", Warning,
			fmt.Sprintf("converting all planned tables needs about %s extra disk of %s free: little headroom", Human(need), Human(free)),
			"watch the disk during apply; "+diskUnseen)}
	}
	return []Finding{newFinding("disk", Info,
		fmt.Sprintf("converting all planned tables needs about %s extra disk (every copy's binlog %s); %s free", Human(need), s.binlogRetention(), Human(free)), diskUnseen)}
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
		fmt.Sprintf("innodb_buffer_pool_size is %s but the converted tables alone will take about %s: reads that hit the OS cache today may go to disk", Human(pool), Human(s.Totals.ProjectedBytes)),
		fmt.Sprintf("raise innodb_buffer_pool_size (dynamic since MySQL 5.7 / MariaDB 10.2) and lower key_buffer_size (now %s) as MyISAM tables go away", Human(s.VarInt("key_buffer_size", 0))))}
}

// human prints a byte count in binary units.
// Human writes a byte count as people read it (1.5 GiB).
func Human(b int64) string {
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
