package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/internal/db/outcome"
	"github.com/enginemig/enginemig/migration/control"
	"github.com/enginemig/enginemig/pace/throttle"
)

// pausable is a minimal control.Handler: the CLI test needs no database.
type pausable struct {
	mu     sync.Mutex
	paused bool
}

func (p *pausable) Pause()                           { p.mu.Lock(); p.paused = true; p.mu.Unlock() }
func (p *pausable) Resume()                          { p.mu.Lock(); p.paused = false; p.mu.Unlock() }
func (p *pausable) Abort()                           {}
func (p *pausable) ReleaseCutover()                  {}
func (p *pausable) SetChunkTime(time.Duration) error { return nil }
func (p *pausable) SetMaxLag(time.Duration) error    { return nil }
func (p *pausable) SetMaxThreadsRunning(int) error   { return nil }
func (p *pausable) Status() control.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return control.Status{Stage: "copy", Throttle: &throttle.Status{Paused: p.paused, ThreadsRunning: -1}}
}

func runControlCLI(args ...string) (string, outcome.Code) {
	var out bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	err := app.RunContext(context.Background(), append([]string{"enginemig", "control"}, args...))
	return out.String(), outcome.CodeOf(err)
}

func TestControlCommand(t *testing.T) {
	dir, err := os.MkdirTemp("", "ctl") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "c.sock")
	h := &pausable{}
	srv, err := control.Listen(context.Background(), sock, h)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	if out, code := runControlCLI("--socket", sock, "pause"); code != outcome.OK || !strings.Contains(out, "paused") {
		t.Fatalf("pause: exit %d, output %q", code, out)
	}
	out, code := runControlCLI("--socket", sock, "status")
	var st control.Status
	if code != outcome.OK || json.Unmarshal([]byte(out), &st) != nil || st.Stage != "copy" || st.Throttle == nil || !st.Throttle.Paused {
		t.Fatalf("status: exit %d, output %q", code, out)
	}

	usage := [][]string{
		{"pause"},                          // no --socket
		{"--socket", sock},                 // no command
		{"--socket", sock, "pause", "now"}, // two commands
		{"--socket", sock, "pasue"},        // typo, caught before sending
		{"--socket", sock, "max-lag=soon"}, // bad value
		{"--no-such-flag", "pause"},
	}
	for _, args := range usage {
		if out, code := runControlCLI(args...); code != outcome.Usage {
			t.Errorf("%v: exit %d, want %d (usage); output %q", args, code, outcome.Usage, out)
		}
	}
	if _, code := runControlCLI("--socket", filepath.Join(dir, "none.sock"), "pause"); code != outcome.Internal {
		t.Errorf("unreachable socket: exit %d, want 1", code)
	}
}
