package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// connTimeout bounds one client's conversation, so a client that connects and says nothing cannot
// hold a goroutine forever.
const connTimeout = 10 * time.Second

// maxLine is far longer than any command; longer input is refused rather than buffered.
const maxLine = 1024

// Server answers control commands on a unix socket until Close or until its context ends.
type Server struct {
	path string
	ln   *net.UnixListener
	h    Handler
	wg   sync.WaitGroup // the accept loop and commands in progress
	done chan struct{}  // closed when the accept loop ends
	once sync.Once
	err  error
}

// Listen serves control commands for h on a unix socket at path, readable and writable by the
// owner only. A socket file left by a dead process is replaced; a socket another process still
// answers on is refused, as is any other kind of file at path.
func Listen(ctx context.Context, path string, h Handler) (*Server, error) {
	if err := clearStale(ctx, path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control: listen on %s: %w", path, err)
	}
	// The socket is created with the process umask; narrow it at once so only the owner (and root)
	// can pause or abort the migration. Setting the umask instead would affect the whole process.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control: restrict %s: %w", path, err)
	}
	s := &Server{path: path, ln: ln, h: h, done: make(chan struct{})}
	s.wg.Add(1)
	go s.serve()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// clearStale removes a socket file whose listener is gone (a crashed apply leaves one behind).
func clearStale(ctx context.Context, path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("control: %s exists and is not a socket; choose another path", path)
	}
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		conn.Close()
		return fmt.Errorf("control: %s is in use by another process (another apply running?); choose another path", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control: check %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("control: remove stale socket %s: %w", path, err)
	}
	return nil
}

// Path is where the server listens.
func (s *Server) Path() string { return s.path }

// Close stops accepting, waits for commands in progress and removes the socket file.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.err = s.ln.Close() // removes the socket file (net's unlink-on-close)
		s.wg.Wait()
	})
	return s.err
}

func (s *Server) serve() {
	defer s.wg.Done()
	defer close(s.done)
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (e.g. out of file descriptors): try again shortly instead of spinning.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(conn)
		}()
	}
}

// handle reads one command line and writes one reply line.
func (s *Server) handle(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(connTimeout))
	r := bufio.NewReaderSize(conn, maxLine)
	line, err := r.ReadSlice('\n')
	var reply string
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		reply = "error: command too long"
	case err == nil, errors.Is(err, io.EOF) && len(line) > 0:
		// A final line without newline counts: `printf pause | socat` style clients send that.
		reply = s.execute(string(line))
	default:
		return // the client went away or timed out before finishing a command
	}
	fmt.Fprintln(conn, reply)
}

// execute runs one command and returns its reply: "ok: ...", "error: ..." or JSON for status.
func (s *Server) execute(line string) string {
	cmd, err := Parse(line)
	if err != nil {
		return "error: " + err.Error()
	}
	switch cmd.Name {
	case "help":
		return "ok: " + HelpText()
	case "status":
		b, err := json.Marshal(s.h.Status())
		if err != nil {
			return "error: status: " + err.Error()
		}
		return string(b)
	case "pause":
		s.h.Pause()
		return "ok: copy paused (change capture continues)"
	case "resume":
		s.h.Resume()
		return "ok: copy resumed"
	case "abort":
		s.h.Abort()
		return "ok: aborting; the original table stays in place"
	case "release-cutover":
		s.h.ReleaseCutover()
		return "ok: cut-over released"
	case "chunk-time":
		err = s.h.SetChunkTime(cmd.Duration)
		return result(err, fmt.Sprintf("chunk-time=%s", cmd.Duration))
	case "max-lag":
		err = s.h.SetMaxLag(cmd.Duration)
		return result(err, fmt.Sprintf("max-lag=%s", cmd.Duration))
	case "max-threads-running":
		err = s.h.SetMaxThreadsRunning(cmd.Int)
		return result(err, fmt.Sprintf("max-threads-running=%d", cmd.Int))
	}
	return "error: unhandled command " + cmd.Name // Parse and this switch disagree: a bug
}

func result(err error, done string) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok: " + done
}
