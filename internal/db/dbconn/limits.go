package dbconn

import (
	"context"
	"database/sql/driver"
	"strconv"
	"strings"
)

// Hosts limit sessions: shared hosting and managed servers commonly cap every statement
// (max_statement_time on MariaDB, globally or per account with GRANT ... WITH MAX_STATEMENT_TIME;
// max_execution_time on MySQL, for SELECT), end idle sessions early (wait_timeout) and bound reads
// (net_read_timeout, net_write_timeout, max_join_size). Each of these only sets a session's
// starting value, which the session may change: so every session enginemig opens lifts them at
// connect. Its statements are long by design (an index build, a copy chunk's read on a large
// table, a verification checksum) and bounded otherwise (by size, by its own deadlines between
// statements, dbconn.ExecWhole); a host's cap killed the index build on the shadow (error 1317)
// and would cut a write into MyISAM half-way. Limits a session cannot lift (MAX_USER_CONNECTIONS,
// MAX_QUERIES_PER_HOUR) are read by plan instead.

// idleLimit is the idle time a session of enginemig's is allowed, in seconds (the servers'
// default): a stage table lives in its session, and a copy throttled for minutes leaves
// its session idle meanwhile. Sessions that must not outlive a lost client (the cut-over's lock
// session) set a short one of their own afterwards.
const idleLimit = 28800

// netLimit is net_read_timeout and net_write_timeout, in seconds: a row reader may
// pause reading a result while the writer catches up.
const netLimit = 600

// freeSession returns the statements that lift the host's session limits on a server of this
// version (VERSION()): the statement limit on its own, so that a setting refused in the other
// (a SET fails whole) leaves it lifted.
func freeSession(version string) []string {
	limit := "SET SESSION max_execution_time = 0"
	if strings.Contains(strings.ToLower(version), "mariadb") {
		limit = "SET SESSION max_statement_time = 0"
	}
	return []string{limit, "SET SESSION " + strings.Join([]string{ // constants: MySQL refuses an expression here (1232)
		"wait_timeout = " + strconv.Itoa(idleLimit),
		"net_read_timeout = " + strconv.Itoa(netLimit),
		"net_write_timeout = " + strconv.Itoa(netLimit),
		"sql_big_selects = 1",
	}, ", ")}
}

// liftLimits runs freeSession on a new connection. A server that refuses a setting leaves it as
// the host made it: a statement of enginemig's that then outlasts the host's limit fails with the
// host's error (a write into MyISAM as an InterruptedWriteError, whole.go), and the run stops
// saying so.
func liftLimits(ctx context.Context, conn driver.Conn, version string) {
	e, ok := conn.(driver.ExecerContext)
	if !ok {
		return
	}
	for _, stmt := range freeSession(version) {
		e.ExecContext(ctx, stmt, nil)
	}
}
