package control

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/enginemig/enginemig/pace/throttle"
)

// fakeHandler records the calls control makes.
type fakeHandler struct {
	mu       sync.Mutex
	calls    []string
	chunk    time.Duration
	lag      time.Duration
	threads  int
	failWith error
}

func (f *fakeHandler) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeHandler) Pause()          { f.record("pause") }
func (f *fakeHandler) Resume()         { f.record("resume") }
func (f *fakeHandler) Abort()          { f.record("abort") }
func (f *fakeHandler) ReleaseCutover() { f.record("release-cutover") }
func (f *fakeHandler) SetChunkTime(d time.Duration) error {
	f.record("chunk-time")
	f.chunk = d
	return f.failWith
}
func (f *fakeHandler) SetMaxLag(d time.Duration) error {
	f.record("max-lag")
	f.lag = d
	return f.failWith
}
func (f *fakeHandler) SetMaxThreadsRunning(n int) error {
	f.record("max-threads-running")
	f.threads = n
	return f.failWith
}
func (f *fakeHandler) Status() Status {
	f.record("status")
	return Status{Stage: "copy", RowsCopied: 42, Throttle: &throttle.Status{Paused: true, ThreadsRunning: -1}}
}

func (f *fakeHandler) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return ""
	}
	return f.calls[len(f.calls)-1]
}

// socketPath is short: unix socket paths must stay under 108 bytes, and t.TempDir can be long.
func socketPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "c.sock")
}

func listen(t *testing.T, h Handler) (string, *Server) {
	t.Helper()
	path := socketPath(t)
	s, err := Listen(context.Background(), path, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return path, s
}

func TestCommands(t *testing.T) {
	h := &fakeHandler{}
	path, _ := listen(t, h)
	ctx := context.Background()
	cases := []struct {
		cmd, call, reply string
	}{
		{"pause", "pause", "copy paused"},
		{"resume", "resume", "copy resumed"},
		{"abort", "abort", "aborting"},
		{"release-cutover", "release-cutover", "cut-over released"},
		{"chunk-time=20ms", "chunk-time", "chunk-time=20ms"},
		{" max-lag = 2s ", "max-lag", "max-lag=2s"},
		{"MAX-THREADS-RUNNING=50", "max-threads-running", "max-threads-running=50"},
		{"max-threads-running=0", "max-threads-running", "max-threads-running=0"},
	}
	for _, c := range cases {
		reply, err := Send(ctx, path, c.cmd)
		if err != nil {
			t.Fatalf("%s: %v", c.cmd, err)
		}
		if !strings.Contains(reply, c.reply) || h.last() != c.call {
			t.Errorf("%s: reply %q, handler call %q", c.cmd, reply, h.last())
		}
	}
	if h.chunk != 20*time.Millisecond || h.lag != 2*time.Second || h.threads != 0 {
		t.Errorf("values reached the handler as chunk=%s lag=%s threads=%d", h.chunk, h.lag, h.threads)
	}

	reply, err := Send(ctx, path, "status")
	if err != nil {
		t.Fatal(err)
	}
	// The reply is one line of snake_case JSON, and GetStatus decodes it back into a Status.
	var raw map[string]any
	if err := json.Unmarshal([]byte(reply), &raw); err != nil || raw["stage"] != "copy" || raw["rows_copied"] != 42.0 {
		t.Fatalf("status reply %q: %v", reply, err)
	}
	st, err := GetStatus(ctx, path)
	if err != nil || st.Stage != "copy" || st.RowsCopied != 42 || st.Throttle == nil || !st.Throttle.Paused {
		t.Fatalf("GetStatus: %+v %v", st, err)
	}

	reply, err = Send(ctx, path, "help")
	if err != nil || !strings.Contains(reply, "release-cutover") || !strings.Contains(reply, "max-lag=DURATION") || strings.Contains(reply, "\n") {
		t.Fatalf("help: %q %v", reply, err)
	}
}

func TestRefusedCommands(t *testing.T) {
	h := &fakeHandler{}
	path, _ := listen(t, h)
	ctx := context.Background()
	cases := []struct{ cmd, want string }{
		{"pasue", "unknown command"},
		{"", "empty command"},
		{"chunk-time", "needs a duration"},
		{"chunk-time=fast", "not a positive duration"},
		{"max-lag=-1s", "not a positive duration"},
		{"max-threads-running=lots", "not a number"},
		{"pause=1", "takes no value"},
	}
	for _, c := range cases {
		_, err := Send(ctx, path, c.cmd)
		var re *RemoteError
		if !errors.As(err, &re) || !strings.Contains(re.Msg, c.want) {
			t.Errorf("%q: got %v, want a refusal containing %q", c.cmd, err, c.want)
		}
	}
	// The unknown-command reply tells the user what exists.
	if _, err := Send(ctx, path, "pasue"); !strings.Contains(err.Error(), "pause, resume") {
		t.Errorf("unknown command reply does not list commands: %v", err)
	}
	if len(h.calls) != 0 {
		t.Errorf("refused commands reached the handler: %v", h.calls)
	}
	// A handler's own refusal reaches the client.
	h.failWith = errors.New("chunk time below 1ms is not useful")
	if _, err := Send(ctx, path, "chunk-time=1us"); err == nil || !strings.Contains(err.Error(), "below 1ms") {
		t.Errorf("handler error: %v", err)
	}
}

func TestSocketFile(t *testing.T) {
	h := &fakeHandler{}
	path, s := listen(t, h)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode %s, want a socket with 0600", st.Mode())
	}

	// A second apply with the same socket path is refused while the first one listens.
	if _, err := Listen(context.Background(), path, h); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Listen on a live socket: %v", err)
	}
	if _, err := Send(context.Background(), path, "pause"); err != nil {
		t.Fatalf("first server broken by the refused second one: %v", err)
	}

	// Close removes the socket; a client then gets ErrUnreachable.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after Close: %v", err)
	}
	if _, err := Send(context.Background(), path, "status"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Send after Close: %v, want ErrUnreachable", err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	path := socketPath(t)
	// A crashed process leaves its socket file behind with nobody listening.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	s, err := Listen(context.Background(), path, &fakeHandler{})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer s.Close()
	if _, err := Send(context.Background(), path, "resume"); err != nil {
		t.Fatal(err)
	}
}

func TestRegularFileNotTouched(t *testing.T) {
	path := socketPath(t)
	if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(context.Background(), path, &fakeHandler{}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatalf("file changed: %q", b)
	}
}

func TestContextEndsServer(t *testing.T) {
	path := socketPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := Listen(ctx, path, &fakeHandler{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("socket still there after the context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSilentClientDoesNotBlockOthers(t *testing.T) {
	path, s := listen(t, &fakeHandler{})
	idle, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := Send(context.Background(), path, "pause"); err != nil {
		t.Fatalf("command while another client is silent: %v", err)
	}
	// Close must not hang on the silent client for long either: it is bounded by connTimeout,
	// and the client hanging up ends it at once.
	idle.Close()
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(connTimeout + 5*time.Second):
		t.Fatal("Close hangs")
	}
}

func TestSendUnreachable(t *testing.T) {
	_, err := Send(context.Background(), filepath.Join(t.TempDir(), "none.sock"), "status")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "none.sock") {
		t.Fatalf("got %v", err)
	}
}
