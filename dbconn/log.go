package dbconn

import (
	"fmt"
	"log/slog"
)

// discard is the logger a nil *slog.Logger stands for.
var discard = slog.New(slog.DiscardHandler)

// Logger returns l, or a logger that discards everything when l is nil: packages take an optional
// *slog.Logger and call this once instead of checking for nil at every line.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}

// Logf adapts l to the printf-style Log fields that migration, cutover and verify still take:
// every line becomes one Info record. It is temporary; once those packages take a *slog.Logger the
// call sites pass the logger itself and this goes away.
func Logf(l *slog.Logger) func(format string, args ...any) {
	l = Logger(l)
	return func(format string, args ...any) {
		l.Info(fmt.Sprintf(format, args...))
	}
}
