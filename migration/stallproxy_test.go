package migration

import (
	"net"
	"sync"
	"testing"
)

// stallProxy forwards TCP connections to a server until stall; from then on it forwards nothing
// and closes nothing, as a network that lost the server would. cut closes every connection it
// carried and forwards new ones again.
type stallProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	stalled bool
	wake    chan struct{}
	conns   []net.Conn
}

func startStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, wake: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
	return p
}

func (p *stallProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *stallProxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	go p.forward(s, c)
	p.forward(c, s)
}

// forward copies src to dst, and a close too; once stalled it forwards nothing, a close neither,
// until cut.
func (p *stallProxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		stalled, wake := p.stalled, p.wake
		p.mu.Unlock()
		if stalled {
			<-wake
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			dst.Close()
			src.Close()
			return
		}
	}
}

func (p *stallProxy) stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

func (p *stallProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	if p.stalled {
		close(p.wake)
		p.wake, p.stalled = make(chan struct{}), false
	}
}
