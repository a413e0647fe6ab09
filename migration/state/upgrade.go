package state

import (
	"context"
	"fmt"
	"strings"
)

// upgrade brings a state table written by an earlier version to this version's columns, in
// place, before the first write: the triggers and capture columns (added over time), and the
// capture-neutral positions, which earlier versions kept as binlog file and offset pairs
// (binlog_start_file/pos, binlog_applied_file/pos, binlog_cutover_file/pos) and a count named
// events_applied. Every step checks the columns first, so an upgrade that died half-way is
// finished by the next one; parallel applies sharing the table take turns on an advisory lock.
func (s *Store) upgrade(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.upgraded {
		return nil
	}
	has, err := s.Columns(ctx)
	if err != nil {
		return err
	}
	if current(has) {
		s.upgraded = true
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	lock := "enginemig-state-upgrade-" + s.schema
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", lock).Scan(&got); err != nil || got != 1 {
		return fmt.Errorf("upgrade state table %s: wait for another enginemig upgrading it: %v", s.Name(), err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", lock)
	if has, err = s.Columns(ctx); err != nil {
		return err
	}
	for _, step := range upgradeSteps(has) {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(step, s.Name())); err != nil {
			return fmt.Errorf("upgrade state table %s: %w", s.Name(), err)
		}
	}
	s.upgraded = true
	return nil
}

// current reports whether the table has this version's columns and no earlier ones.
func current(has map[string]bool) bool {
	return has["triggers"] && has["capture"] && has["capture_start"] && !has["binlog_start_file"]
}

// upgradeSteps are the statements (%s: the table) that bring a table with columns has up to date.
func upgradeSteps(has map[string]bool) []string {
	var steps []string
	if !has["triggers"] {
		steps = append(steps, "ALTER TABLE %s ADD COLUMN triggers LONGTEXT NULL")
	}
	if !has["capture"] {
		steps = append(steps, "ALTER TABLE %s ADD COLUMN capture VARCHAR(16) NOT NULL DEFAULT 'binlog'")
	}
	if !has["capture_start"] {
		cols := []string{"ADD COLUMN capture_start VARCHAR(255) NOT NULL DEFAULT ''", "ADD COLUMN capture_cutover VARCHAR(255) NOT NULL DEFAULT ''",
			"ADD COLUMN capture_resume VARCHAR(255) NOT NULL DEFAULT ''"}
		if has["events_applied"] {
			cols = append(cols, "CHANGE COLUMN events_applied capture_changes BIGINT NOT NULL DEFAULT 0")
		} else {
			cols = append(cols, "ADD COLUMN capture_changes BIGINT NOT NULL DEFAULT 0")
		}
		steps = append(steps, "ALTER TABLE %s "+strings.Join(cols, ", "))
	}
	if has["binlog_start_file"] {
		steps = append(steps, "UPDATE %s SET capture_start = "+legacyPos("binlog_start")+", capture_cutover = "+legacyPos("binlog_cutover")+
			", capture_resume = "+legacyPos("binlog_applied"),
			"ALTER TABLE %s DROP COLUMN binlog_start_file, DROP COLUMN binlog_start_pos, DROP COLUMN binlog_cutover_file, "+
				"DROP COLUMN binlog_cutover_pos, DROP COLUMN binlog_applied_file, DROP COLUMN binlog_applied_pos")
	}
	return steps
}

// legacyPos reads an earlier version's binlog file and offset columns (prefix_file, prefix_pos)
// as the binlog capture spells a position (file:offset; empty for none).
func legacyPos(prefix string) string {
	return fmt.Sprintf("IF(%[1]s_file = '', '', CONCAT(%[1]s_file, ':', %[1]s_pos))", prefix)
}
