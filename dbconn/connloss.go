package dbconn

import (
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
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "invalid connection") || strings.Contains(s, "bad connection") ||
		strings.Contains(s, "connection refused") || strings.Contains(s, "broken pipe") || strings.Contains(s, "EOF")
}
