// Package outcome classifies failures into enginemig's stable, documented exit codes, so every
// package can say what kind of failure it hit and the CLI maps it to one code without guessing.
package outcome

import (
	"errors"
	"fmt"
)

// Code is a process exit code. The values are part of the public interface: scripts depend on them.
type Code int

const (
	OK             Code = 0 // success
	Internal       Code = 1 // unexpected error (a bug or an unclassified failure)
	Usage          Code = 2 // bad flags, arguments or plan file
	Connection     Code = 3 // cannot connect or authenticate to the server
	Refused        Code = 4 // plan blocker / preflight refusal: nothing was changed
	GateFailed     Code = 5 // a benchmark gate did not pass: nothing was swapped
	FailedSafe     Code = 6 // migration failed or was aborted; the original table is in place and unchanged
	NeedsAttention Code = 7 // migration failed in a state a human must look at (see the message)
	// CutoverPending: the copy is done and verified, but the swap could not get in before
	// --cutover-timeout; the shadow and the state are kept, and running the same apply again goes
	// straight to the cut-over.
	CutoverPending Code = 8
	// MyISAMRemains: plan --check found application tables still in MyISAM (a nightly check's
	// failure, lint-style: nothing is wrong with the server, something is left to convert).
	MyISAMRemains Code = 9
)

// Name is a stable machine-readable name for JSON output.
func (c Code) Name() string {
	switch c {
	case OK:
		return "ok"
	case Usage:
		return "usage"
	case Connection:
		return "connection"
	case Refused:
		return "refused"
	case GateFailed:
		return "gate_failed"
	case FailedSafe:
		return "failed_safe"
	case NeedsAttention:
		return "needs_attention"
	case CutoverPending:
		return "cutover_pending"
	case MyISAMRemains:
		return "myisam_remains"
	default:
		return "internal"
	}
}

// Error carries a code and, when known, what the user should do about it.
type Error struct {
	Code   Code
	Err    error
	Remedy string
}

func (e *Error) Error() string {
	if e.Remedy == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + "; " + e.Remedy
}

func (e *Error) Unwrap() error { return e.Err }

// New wraps err with a code and an optional remedy. A failure that needs attention keeps its
// code when a caller that knows only its own part calls it failed safe: the table may be as it
// was, but something (a replica, a partial write) still needs a person.
func New(code Code, err error, remedy string) error {
	if err == nil {
		return nil
	}
	if code == FailedSafe && CodeOf(err) == NeedsAttention {
		code = NeedsAttention
	}
	return &Error{Code: code, Err: err, Remedy: remedy}
}

// Errorf builds a coded error from a format; %w is honoured.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// CodeOf returns the code of the outermost coded error in err's chain; OK for nil, Internal when
// nothing classified it.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}
