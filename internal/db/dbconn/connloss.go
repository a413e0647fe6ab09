package dbconn

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// IsConnectionLoss reports errors after which the server-side work is intact and a re-run can
// resume: lost or refused connections and server restarts.
func IsConnectionLoss(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1053, 1927, 2006, 2013: // server shutdown, connection killed, gone away, lost
			return true
		}
	}
	// A deadline of enginemig's own (a catch-up that took too long) is no lost connection, though
	// context.DeadlineExceeded satisfies net.Error: resuming would hide the real failure.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "invalid connection") || strings.Contains(s, "bad connection") ||
		strings.Contains(s, "connection refused") || strings.Contains(s, "broken pipe") || strings.Contains(s, "EOF")
}
