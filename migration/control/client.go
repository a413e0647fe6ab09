package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// ErrUnreachable wraps failures to reach a control socket (nothing listening, no such file,
// permission denied), so the CLI can tell them from a refused command.
var ErrUnreachable = errors.New("control socket unreachable")

// RemoteError is a command the running apply refused; Msg is its explanation.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

// Send delivers one command to the control socket at path and returns the reply line ("ok: ..."
// text with the prefix removed, or JSON for status). A refused command is a *RemoteError; a socket
// that cannot be reached wraps ErrUnreachable.
func Send(ctx context.Context, path, command string) (string, error) {
	if _, hasDeadline := ctx.Deadline(); !hasDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, connTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w (is an apply with this control socket running?)", ErrUnreachable, path, err)
	}
	defer conn.Close()
	// The deadline makes a stuck server release the client, and cancelling ctx does too.
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintln(conn, strings.TrimSpace(command)); err != nil {
		return "", fmt.Errorf("control: send to %s: %w", path, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil && line == "" {
		if ctx.Err() != nil {
			return "", fmt.Errorf("control: no reply from %s: %w", path, ctx.Err())
		}
		return "", fmt.Errorf("control: read reply from %s: %w", path, err)
	}
	line = strings.TrimRight(line, "\r\n")
	if msg, ok := strings.CutPrefix(line, "error: "); ok {
		return "", &RemoteError{Msg: msg}
	}
	return strings.TrimPrefix(line, "ok: "), nil
}
