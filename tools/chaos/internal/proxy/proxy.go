// Package proxy is a TCP proxy with faults, one per node, so that a fault
// can hit one node's connections to the backend: black-holed (bytes are
// held, connections stay open, as in a partition), slowed (every chunk is
// delayed), reset (every connection closed at once) or refused (new
// connections closed as soon as they are accepted).
package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is the fault a proxy applies.
type Mode int

// The modes.
const (
	Pass      Mode = iota // forward bytes as they come
	BlackHole             // hold every byte until the mode changes
	Slow                  // delay every chunk by the proxy's delay
	Refuse                // close new connections at once
)

// Proxy forwards connections from its listener to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every mode change
	mode    Mode
	delay   time.Duration
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// Listen starts a proxy on a free loopback port that forwards to target.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{ln: ln, target: target, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address nodes connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode; delay matters for Slow only.
func (p *Proxy) Set(m Mode, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay = m, delay
	close(p.changed)
	p.changed = make(chan struct{})
	if m == Refuse {
		p.resetLocked()
	}
}

// Reset closes every connection open now.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
}

func (p *Proxy) resetLocked() {
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // an RST, as a server or middlebox dropping the connection sends
		}
		_ = c.Close()
	}
}

func (p *Proxy) state() (Mode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if m, _, _ := p.state(); m == Refuse || !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.pump(up, c); done <- struct{}{} }()
	go func() { defer p.wg.Done(); p.pump(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}

// pump copies src to dst chunk by chunk, applying the mode to each chunk.
func (p *Proxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.hold() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// hold waits as the mode says before a chunk is forwarded; it reports
// false when the proxy closed meanwhile.
func (p *Proxy) hold() bool {
	for {
		m, delay, changed := p.state()
		switch m {
		case Pass:
			return true
		case Slow:
			t := time.NewTimer(delay)
			select {
			case <-t.C:
				return true
			case <-changed: // a mode change cuts the delay short
				t.Stop()
			}
		case BlackHole, Refuse:
			<-changed
		}
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
	}
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	close(p.changed)
	p.changed = make(chan struct{})
	p.mode = Pass
	p.resetLocked()
	p.mu.Unlock()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	return nil
}
