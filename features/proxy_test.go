package features

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"time"
)

// proxy forwards TCP connections from a port of its own to one server, and
// can black-hole them: while stalled, no byte moves in either direction and
// new connections are accepted but not forwarded, as with a frozen process or
// a network partition. Nothing is dropped: bytes read before or during a
// stall are delivered once it heals, if the connection still exists.
type proxy struct {
	ln     net.Listener
	target string
	hello  func(frame []byte) // sees the first frame (after its 4-byte length) each connection gets from the server; may be nil
	done   chan struct{}      // closed by Close

	mu     sync.Mutex
	open   chan struct{} // closed while the proxy forwards; a fresh one while stalled
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// newProxy listens on a free loopback port and forwards to target; hello,
// when not nil, sees the first length-prefixed frame of every connection
// from the server.
func newProxy(target string, hello func([]byte)) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, hello: hello, done: make(chan struct{}), open: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the host:port clients dial instead of the server's.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Stall stops every transfer until Heal.
func (p *proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // already stalled
	}
}

// Heal resumes the transfers Stall stopped.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// Close stops listening, cuts every connection and waits for the proxy's
// goroutines.
func (p *proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers c to be cut by Close; it closes c and reports false when
// the proxy is already closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// serve connects client to the target once the proxy is not stalled, and
// copies both ways until either side ends.
func (p *proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	if !p.wait() {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(server) {
		return
	}
	defer p.untrack(server)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		p.copy(client, server, p.hello)
		_ = client.Close()
	}()
	p.copy(server, client, nil)
	_ = server.Close()
	<-copied
}

// copy moves bytes from src to dst, holding them while the proxy is
// stalled; hello, when not nil, is given the first length-prefixed frame.
func (p *proxy) copy(dst, src net.Conn, hello func([]byte)) {
	buf := make([]byte, 32<<10)
	var head []byte
	for {
		n, err := src.Read(buf)
		if n > 0 && hello != nil {
			head = append(head, buf[:n]...)
			if frame, done := firstFrame(head); done {
				if frame != nil {
					hello(frame)
				}
				hello, head = nil, nil
			}
		}
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// firstFrame returns the frame at the start of head, a 4-byte big-endian
// length and that many bytes, once head holds it all; done without a frame
// when the length is not one of a small frame.
func firstFrame(head []byte) (frame []byte, done bool) {
	if len(head) < 4 {
		return nil, false
	}
	size := int(binary.BigEndian.Uint32(head))
	if size > 4<<10 {
		return nil, true
	}
	if len(head) < 4+size {
		return nil, false
	}
	return head[4 : 4+size], true
}

// wait blocks while the proxy is stalled; it reports false once the proxy
// is closed.
func (p *proxy) wait() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-p.done:
		return false
	case <-open:
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
}

// proxies is the set of proxies one node connects through.
type proxies []*proxy

func (ps proxies) Stall() {
	for _, p := range ps {
		p.Stall()
	}
}

func (ps proxies) Heal() {
	for _, p := range ps {
		p.Heal()
	}
}

func (ps proxies) Close() {
	for _, p := range ps {
		p.Close()
	}
}

// proxyAll starts one proxy per target address, each with hello (see
// newProxy).
func proxyAll(targets []string, hello func([]byte)) (proxies, error) {
	var ps proxies
	for _, t := range targets {
		p, err := newProxy(t, hello)
		if err != nil {
			ps.Close()
			return nil, errors.Join(errors.New("features: start proxy to "+t), err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}
