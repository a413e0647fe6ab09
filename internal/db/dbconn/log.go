package dbconn

import "log/slog"

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
