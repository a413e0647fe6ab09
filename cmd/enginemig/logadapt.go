package main

import (
	"bytes"
	"log/slog"
	"strings"
)

// printfLogger shows slog records through a printf-style sink (the progress display's log line):
// the message, then its attributes as key=value.
func printfLogger(sink func(format string, args ...any)) *slog.Logger {
	return slog.New(slog.NewTextHandler(sinkWriter(sink), &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
				return slog.Attr{}
			}
			if len(groups) == 0 && a.Key == slog.MessageKey {
				return slog.String("msg", a.Value.String())
			}
			return a
		}}))
}

type sinkWriter func(format string, args ...any)

func (s sinkWriter) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(bytes.TrimPrefix(b, []byte("msg="))))
	s("%s", line)
	return len(b), nil
}
