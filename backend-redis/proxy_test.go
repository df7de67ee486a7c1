package simbaredis

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections to a server and can freeze them: while
// frozen, bytes in both directions are held back, as on a network that
// silently stopped delivering. Connections made while frozen are
// accepted but get nothing through either.
type proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// startProxy forwards a new local port to target until the test ends.
func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{target: target, ln: ln}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// freeze holds every byte back until thaw.
func (p *proxy) freeze() { p.set(true) }

func (p *proxy) thaw() { p.set(false) }

func (p *proxy) set(frozen bool) {
	p.mu.Lock()
	p.frozen = frozen
	p.mu.Unlock()
	p.cond.Broadcast()
}

// track records c so that close can end it; it reports false (and closes
// c) when the proxy is already closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = down.Close()
			continue
		}
		if !p.track(down) || !p.track(up) {
			_ = up.Close()
			_ = down.Close()
			return
		}
		p.wg.Add(2)
		go p.pipe(up, down)
		go p.pipe(down, up)
	}
}

// pipe copies from src to dst, holding each chunk while frozen.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			return
		}
	}
}

// close ends the listener and every connection and waits for the copies.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	p.cond.Broadcast()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}
