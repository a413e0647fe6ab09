// Package control lets an operator steer a running apply from another shell: pause, resume, abort,
// release a postponed cut-over, and change the chunk time and throttle limits, over a unix socket.
package control

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Handler is what a running migration exposes to control. Methods are called from the control
// server's goroutines, so implementations must be safe for concurrent use.
type Handler interface {
	Pause()
	Resume()
	Abort()
	ReleaseCutover()
	SetChunkTime(time.Duration) error
	SetMaxLag(time.Duration) error
	SetMaxThreadsRunning(int) error
	// Status returns a snapshot of the migration.
	Status() Status
}

// Command is one parsed control command.
type Command struct {
	Name     string        // status, pause, resume, abort, release-cutover, chunk-time, max-lag, max-threads-running, help
	Duration time.Duration // for chunk-time and max-lag
	Int      int           // for max-threads-running
}

// commandHelp lists every command with what it does; help and error replies are built from it.
var commandHelp = []struct{ syntax, what string }{
	{"status", "JSON snapshot of the migration"},
	{"pause", "pause the copy; change capture continues"},
	{"resume", "resume the copy"},
	{"abort", "stop the migration cleanly; the original table stays in place"},
	{"release-cutover", "let a postponed cut-over proceed"},
	{"chunk-time=DURATION", "target lock time per copy chunk, e.g. 20ms"},
	{"max-lag=DURATION", "pause the copy while a replica lags more, e.g. 2s"},
	{"max-threads-running=N", "pause the copy while Threads_running exceeds N; 0 turns it off"},
	{"help", "this list"},
}

// HelpText is the one-line list of commands with what each does (the reply to help).
func HelpText() string {
	parts := make([]string, len(commandHelp))
	for i, c := range commandHelp {
		parts[i] = c.syntax + " - " + c.what
	}
	return strings.Join(parts, " | ")
}

// HelpLines lists the commands one per entry, for multi-line help.
func HelpLines() []string {
	lines := make([]string, len(commandHelp))
	for i, c := range commandHelp {
		lines[i] = fmt.Sprintf("%-22s %s", c.syntax, c.what)
	}
	return lines
}

// CommandNames lists the command syntaxes, for short error messages.
func CommandNames() string {
	names := make([]string, len(commandHelp))
	for i, c := range commandHelp {
		names[i] = c.syntax
	}
	return strings.Join(names, ", ")
}

// Parse validates one command line. The CLI calls it before connecting so a typo is a usage error
// even when nothing is listening; the server calls it again because any client may connect.
func Parse(line string) (Command, error) {
	line = strings.TrimSpace(line)
	name, value, hasValue := strings.Cut(line, "=")
	name = strings.ToLower(strings.TrimSpace(name))
	value = strings.TrimSpace(value)
	switch name {
	case "status", "pause", "resume", "abort", "release-cutover", "help":
		if hasValue {
			return Command{}, fmt.Errorf("%s takes no value", name)
		}
		return Command{Name: name}, nil
	case "chunk-time", "max-lag":
		if !hasValue || value == "" {
			return Command{}, fmt.Errorf("%s needs a duration, e.g. %s=%s", name, name, example(name))
		}
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return Command{}, fmt.Errorf("%s: %q is not a positive duration (e.g. %s)", name, value, example(name))
		}
		return Command{Name: name, Duration: d}, nil
	case "max-threads-running":
		if !hasValue || value == "" {
			return Command{}, fmt.Errorf("%s needs a number, e.g. %s=50 (0 turns the check off)", name, name)
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return Command{}, fmt.Errorf("%s: %q is not a number >= 0", name, value)
		}
		return Command{Name: name, Int: n}, nil
	case "":
		return Command{}, fmt.Errorf("empty command; commands: %s", CommandNames())
	}
	return Command{}, fmt.Errorf("unknown command %q; commands: %s", line, CommandNames())
}

func example(name string) string {
	if name == "chunk-time" {
		return "20ms"
	}
	return "2s"
}
