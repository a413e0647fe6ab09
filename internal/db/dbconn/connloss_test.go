package dbconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// Which failures a run resumes after by itself: a lost connection, not a deadline of its own
// (context.DeadlineExceeded also satisfies net.Error).
func TestIsConnectionLoss(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 2013, Message: "Lost connection"}, true},
		{fmt.Errorf("copy: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), true},
		{mysql.ErrInvalidConn, true},
		{fmt.Errorf("verify: the target did not catch up within 5s: %w", context.DeadlineExceeded), false},
		{fmt.Errorf("step: %w", context.Canceled), false},
		{&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, false},
	} {
		if got := IsConnectionLoss(c.err); got != c.want {
			t.Errorf("IsConnectionLoss(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
