package plan

import (
	"errors"
	"strings"
	"testing"
)

// Auto capture follows what the account can do, not only the server's settings: a hosted
// account (one database, no replication privilege) captures with triggers where it may create
// them, and a refusal names every route, not only the one that needs root.
func TestCaptureFollowsTheAccount(t *testing.T) {
	const hosted = "GRANT ALL PRIVILEGES ON `site`.* TO `em`@`%`"
	const managed = "GRANT REPLICATION SLAVE, BINLOG MONITOR, PROCESS ON *.* TO `em`@`%`"
	noBinlog := func() *ServerInfo { return server("10.11.6-MariaDB", map[string]string{"log_bin": "OFF"}) }
	trusting := func() *ServerInfo {
		s := binlogServer()
		s.Variables["log_bin_trust_function_creators"] = "ON"
		return s
	}
	for _, c := range []struct {
		name, want string
		s          *ServerInfo
		mode       string   // "" : refused
		says       []string // in why, or in the refusal and its remedies
	}{
		{"managed account, ROW binlog", "", grants(binlogServer(), managed, hosted), CaptureBinlog, nil},
		{"grants unknown, ROW binlog", "", binlogServer(), CaptureBinlog, nil},
		{"hosted, no binlog", "", grants(noBinlog(), hosted), CaptureTriggers, []string{"log_bin is OFF"}},
		{"hosted, ROW binlog, trusted creators", "", grants(trusting(), hosted), CaptureTriggers, []string{"lacks REPLICATION SLAVE, BINLOG MONITOR"}},
		{"hosted, ROW binlog", "", grants(binlogServer(), hosted), "",
			[]string{"lacks REPLICATION SLAVE", "error 1419", "GRANT REPLICATION SLAVE, BINLOG MONITOR", "log_bin_trust_function_creators = 1"}},
		{"managed, STATEMENT binlog, no SUPER", "", grants(server("10.11.6-MariaDB", map[string]string{"log_bin": "ON", "binlog_format": "STATEMENT"}), managed, hosted), "",
			[]string{"binlog_format=STATEMENT", "error 1419", "binlog_format=ROW", "log_bin_trust_function_creators"}},
		{"--capture triggers, ROW binlog, no SUPER", CaptureTriggers, grants(binlogServer(), managed, hosted), "", []string{"error 1419", "log_bin_trust_function_creators"}},
		{"--capture triggers, SUPER", CaptureTriggers, grants(binlogServer(), "GRANT SUPER ON *.* TO `em`@`%`", hosted), CaptureTriggers, nil},
		{"--capture binlog, hosted", CaptureBinlog, grants(binlogServer(), hosted), "", []string{"lacks REPLICATION SLAVE", "GRANT REPLICATION SLAVE"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mode, why, err := ChooseCapture(c.s, c.want)
			text := why
			if r := (*CaptureRefusal)(nil); errors.As(err, &r) {
				text = r.Why + " | " + r.Remedy()
			} else if err != nil {
				t.Fatal(err)
			}
			if mode != c.mode {
				t.Fatalf("capture %q (%s), want %q", mode, text, c.mode)
			}
			for _, s := range c.says {
				if !strings.Contains(text, s) {
					t.Errorf("%q not said: %s", s, text)
				}
			}
		})
	}
}

// On MySQL the cut-over needs performance_schema.metadata_locks: without it plan blocks (apply
// would copy the table and then fail every cut-over attempt); MariaDB does not need it.
func TestMySQLCutoverNeedsMetadataLocks(t *testing.T) {
	ps := func(s *ServerInfo, on bool) *ServerInfo { s.PerformanceSchema = on; return s }
	for _, c := range []struct {
		name    string
		s       *ServerInfo
		blocked bool
	}{
		{"MySQL, performance_schema off", ps(server("9.7.4", map[string]string{"version": "9.7.4"}), false), true},
		{"MySQL, no SELECT on it", ps(grants(server("9.7.4", map[string]string{"version": "9.7.4"}), "GRANT ALL PRIVILEGES ON `site`.* TO `em`@`%`"), true), true},
		{"MySQL, readable", ps(grants(server("9.7.4", map[string]string{"version": "9.7.4"}), "GRANT SELECT ON `performance_schema`.* TO `em`@`%`"), true), false},
		{"MariaDB, performance_schema off", ps(server("10.11.6-MariaDB", map[string]string{"version": "10.11.6-MariaDB"}), false), false},
	} {
		fs := checkMySQLMetadataLocks(c.s)
		if blocked := len(fs) == 1 && fs[0].Severity == Blocker; blocked != c.blocked {
			t.Errorf("%s: %+v, want blocked=%v", c.name, fs, c.blocked)
		}
	}
}
