package main

import (
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/enginemig/enginemig/internal/db/dbconn"
	"github.com/enginemig/enginemig/internal/db/outcome"
)

// logFlags are the app's global flags for the log on stderr.
func logFlags() []cli.Flag {
	const cat = "Logging"
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "least severe log records shown on stderr: debug, info, warn or error", Category: cat},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log records as text (key=value) or json (one object per line)", Category: cat},
	}
}

// logging is the logger built once from the global flags, kept in the app's Metadata.
type logging struct {
	logger *slog.Logger
	sink   *logSink
}

const loggingKey = "logging"

// setupLogging is the app's Before: it validates the log flags and builds the logger that every
// command passes down.
func setupLogging(c *cli.Context) error {
	l, err := newLogging(c.String("log-level"), c.String("log-format"), c.App.ErrWriter)
	if err != nil {
		return err
	}
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[loggingKey] = l
	return nil
}

func newLogging(level, format string, w io.Writer) (*logging, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, outcome.Errorf(outcome.Usage, "--log-level %q: want debug, info, warn or error", level)
	}
	sink := &logSink{w: w}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text":
		h = slog.NewTextHandler(sink, opts)
	case "json":
		h = slog.NewJSONHandler(sink, opts)
	default:
		return nil, outcome.Errorf(outcome.Usage, "--log-format %q: want text or json", format)
	}
	return &logging{logger: slog.New(h), sink: sink}, nil
}

// loggerOf is the app's logger (one that discards when the app was run without setupLogging).
func loggerOf(c *cli.Context) *slog.Logger {
	if l, ok := c.App.Metadata[loggingKey].(*logging); ok {
		return l.logger
	}
	return dbconn.Logger(nil)
}

// onLog makes the progress bar clear itself before each log record (nil: stop).
func onLog(c *cli.Context, clear func()) {
	if l, ok := c.App.Metadata[loggingKey].(*logging); ok {
		l.sink.setBefore(clear)
	}
}

// logSink is stderr for the log: a progress bar drawn there is cleared before a record is written,
// and redraws itself on its next update.
type logSink struct {
	mu     sync.Mutex
	w      io.Writer
	before func()
}

func (s *logSink) setBefore(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = f
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.before != nil {
		s.before()
	}
	return s.w.Write(p)
}
