package plan

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/enginemig/enginemig/internal/db/dbconn"
)

// AccountLimits are the limits the server puts on the account enginemig connects as, which no
// session may lift (dbconn lifts the ones it can): hosts and managed servers set them per account
// (GRANT/ALTER USER ... WITH MAX_USER_CONNECTIONS ...), and the application often shares the
// account.
type AccountLimits struct {
	// Connections is how many connections the account may hold at once (MAX_USER_CONNECTIONS, or
	// the server's max_user_connections); 0: no limit.
	Connections int `json:"max_user_connections"`
	// InUse is how many of the account's connections are open now that are not enginemig's own
	// (the application's, when it shares the account).
	InUse int `json:"connections_in_use"`
	// QueriesPerHour, UpdatesPerHour, ConnectionsPerHour: MAX_QUERIES_PER_HOUR,
	// MAX_UPDATES_PER_HOUR, MAX_CONNECTIONS_PER_HOUR (0: no limit).
	QueriesPerHour     int `json:"max_queries_per_hour"`
	UpdatesPerHour     int `json:"max_updates_per_hour"`
	ConnectionsPerHour int `json:"max_connections_per_hour"`
	// Unread says what could not be read (the limits then count as none).
	Unread string `json:"unread,omitempty"`
}

var hourlyLimitRe = regexp.MustCompile(`MAX_(QUERIES|UPDATES|CONNECTIONS)_PER_HOUR\s+(\d+)`)

// LoadAccount reads the account's limits. The session's max_user_connections is the account's
// MAX_USER_CONNECTIONS where it has one, else the server's; the hourly limits are only in the
// account's definition (SHOW CREATE USER, which every account may run on itself; its text holds
// the password hash, so nothing but the limits is kept from it).
func LoadAccount(ctx context.Context, q Querier) AccountLimits {
	var a AccountLimits
	if err := q.QueryRowContext(ctx, "SELECT @@SESSION.max_user_connections").Scan(&a.Connections); err != nil {
		a.Unread = "max_user_connections: " + err.Error()
	}
	a.InUse = otherConnections(ctx, q)
	var create string
	if err := q.QueryRowContext(ctx, "SHOW CREATE USER CURRENT_USER()").Scan(&create); err != nil {
		if a.Unread != "" {
			a.Unread += "; "
		}
		a.Unread += "the hourly limits (SHOW CREATE USER): " + err.Error()
		return a
	}
	for _, m := range hourlyLimitRe.FindAllStringSubmatch(create, -1) {
		n, _ := strconv.Atoi(m[2])
		switch m[1] {
		case "QUERIES":
			a.QueriesPerHour = n
		case "UPDATES":
			a.UpdatesPerHour = n
		case "CONNECTIONS":
			a.ConnectionsPerHour = n
		}
	}
	return a
}

// otherConnections counts the connections of the account's user that are not this process's own
// (dbconn.OwnPeers). Without PROCESS the process list shows the user's connections only; with it,
// every user's, so it is filtered by name. -1 when it cannot be read.
func otherConnections(ctx context.Context, q Querier) int {
	rows, err := q.QueryContext(ctx, `SELECT CONNECTION_ID(), ID FROM information_schema.PROCESSLIST
		WHERE USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)`)
	if err != nil {
		return -1
	}
	defer rows.Close()
	var ids []int64
	var self int64
	for rows.Next() {
		var id int64
		if rows.Scan(&self, &id) != nil {
			return -1
		}
		ids = append(ids, id)
	}
	if rows.Err() != nil {
		return -1
	}
	own := dbconn.OwnPeers(self)
	n := 0
	for _, id := range ids {
		if id != self && !own[id] {
			n++
		}
	}
	return n
}

func init() {
	registerServer("account-limits", Blocker, "the account's own limits (MAX_USER_CONNECTIONS, MAX_QUERIES_PER_HOUR, ...), shared with the application when it uses the same account: blocks when apply's connections do not fit", checkAccountLimits)
}

// accountRemedy is what a DBA on a host can do about an account limit: the host can raise it, and
// an account of enginemig's own keeps the application's allowance whole (the limits are per
// account).
const accountRemedy = "give enginemig an account of its own on this database (a second database user: hosts' control panels create one; " +
	"the limits count per account, so the application keeps all of its own), or ask the host to raise the limit"

func checkAccountLimits(s *ServerInfo) []Finding {
	a := s.Account
	var out []Finding
	if a.Connections > 0 && s.ApplyConnections > 0 {
		inUse := max(a.InUse, 0)
		left := a.Connections - inUse
		msg := fmt.Sprintf("apply holds up to %d connections at once; the account may hold %d (max_user_connections) and %d of them are open now that are not enginemig's",
			s.ApplyConnections, a.Connections, inUse)
		if a.InUse < 0 {
			msg = fmt.Sprintf("apply holds up to %d connections at once; the account may hold %d (max_user_connections); how many the application holds could not be read",
				s.ApplyConnections, a.Connections)
		}
		if s.ApplyConnections > left {
			out = append(out, newFinding("account-limits", Blocker, msg+", so apply would be refused connections (error 1203) mid-run",
				fmt.Sprintf("%s to at least %d; then plan again", accountRemedy, inUse+s.ApplyConnections+max(inUse, 1))))
		} else {
			out = append(out, newFinding("account-limits", Warning, msg+fmt.Sprintf(": while apply runs the application has %d left, and a connection past them fails (error 1203)", left-s.ApplyConnections),
				accountRemedy))
		}
	}
	if hourly := hourlyLimits(a); hourly != "" {
		share := HourlyShare(a)
		msg := "the account has hourly limits (" + hourly + "), shared with the application when it uses the same account; once one is reached the server refuses the account's statements, the application's too (error 1226), until the hour ends"
		if share < WatchPerHour {
			out = append(out, newFinding("account-limits", Blocker, msg+fmt.Sprintf(
				". apply keeps to half of the smaller statement limit, %d an hour, but its watchers alone (the lock-wait poll, the disk watch) send about %d an hour", share, WatchPerHour),
				fmt.Sprintf("%s to at least %d statements an hour; then plan again", accountRemedy, 4*WatchPerHour)))
		} else {
			out = append(out, newFinding("account-limits", Warning, msg+fmt.Sprintf(
				". apply keeps to half of the smaller statement limit, %d an hour: the copy, verification, trigger capture's syncs and the cut-over wait while it is spent (throttle reason account-hourly), its watchers send about %d an hour throughout, binlog replay follows the application's writes in batches of up to 5 s, and it paces without probing the application (the automatic pace's probe alone is about 400,000 an hour), so a large table may take hours", share, WatchPerHour),
				accountRemedy))
		}
	}
	return out
}

// WatchPerHour is about how many statements an hour apply sends on an account with an hourly
// limit whatever else it does: the lock-wait poll four times a second, the disk watch once a
// second (TestAccountLimitsKeepApplyWithin measures it while the work is held).
const WatchPerHour = 6 * 3600

// HourlyShare is the statements an hour apply allows itself on an account with hourly limits:
// half the smaller of MAX_QUERIES_PER_HOUR and MAX_UPDATES_PER_HOUR (every statement is counted
// against both, to be safe), leaving the other half to the application; 0 when there are none.
func HourlyShare(a AccountLimits) int64 {
	limit := 0
	for _, l := range []int{a.QueriesPerHour, a.UpdatesPerHour} {
		if l > 0 && (limit == 0 || l < limit) {
			limit = l
		}
	}
	return int64(limit / 2)
}

// hourlyLimits names the account's hourly limits, "" when it has none.
func hourlyLimits(a AccountLimits) string {
	var parts []string
	for _, l := range []struct {
		name string
		n    int
	}{{"MAX_QUERIES_PER_HOUR", a.QueriesPerHour}, {"MAX_UPDATES_PER_HOUR", a.UpdatesPerHour}, {"MAX_CONNECTIONS_PER_HOUR", a.ConnectionsPerHour}} {
		if l.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", l.name, l.n))
		}
	}
	return strings.Join(parts, ", ")
}
