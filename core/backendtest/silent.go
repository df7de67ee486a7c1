package backendtest

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// Proxy forwards the TCP connections made to its address to a server,
// and can hold every byte back in both directions (Silence) until Resume,
// as a network that silently stopped delivering; connections made
// meanwhile are accepted and get nothing through either.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cond   *sync.Cond
	silent bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// NewProxy forwards a free port of 127.0.0.1 to target (HOST:PORT) until
// t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's HOST:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Silence holds every byte back until Resume.
func (p *Proxy) Silence() { p.set(true) }

// Resume delivers what Silence held back, and what follows.
func (p *Proxy) Resume() { p.set(false) }

func (p *Proxy) set(silent bool) {
	p.mu.Lock()
	p.silent = silent
	p.mu.Unlock()
	p.cond.Broadcast()
}

// track records c for close; once the proxy is closed it closes c and
// returns false.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *Proxy) accept() {
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
			return
		}
		p.wg.Go(func() { p.pipe(up, down) })
		p.wg.Go(func() { p.pipe(down, up) })
	}
}

// pipe copies src to dst, holding each chunk while silent, and closes
// dst when src ends.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.silent && !p.closed {
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
func (p *Proxy) close() {
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

// The bounds of the silent checks: the context of a call, how long after
// it the call may still be running on a loaded machine, and how long
// Close may take with calls hanging on a silent server.
const (
	silentCall  = 300 * time.Millisecond
	silentSlack = time.Second
	closeWithin = 6 * time.Second
)

// took runs f and returns how long it ran.
func took(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// wantSilenceError fails unless call, given a context of silentCall,
// returned within silentSlack of it with an error matching
// context.DeadlineExceeded and not simba.ErrSessionExpired: a server that
// does not answer says nothing about the session.
func (e *env) wantSilenceError(op string, call func(context.Context) error) {
	e.t.Helper()
	var err error
	d := took(func() {
		ctx, cancel := context.WithTimeout(e.t.Context(), silentCall)
		defer cancel()
		err = call(ctx)
	})
	switch {
	case d > silentCall+silentSlack:
		e.t.Errorf("%s on a silent server with a context of %v returned after %v", op, silentCall, d.Round(time.Millisecond))
	case !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, simba.ErrSessionExpired):
		e.t.Errorf("%s on a silent server = %v, want a transient error matching context.DeadlineExceeded", op, err)
	}
}

// testSilentServer: opening a backend on a server that accepts
// connections and never answers fails soon after the open's context
// ends, with an error matching context.DeadlineExceeded; a backend that
// opens without a word from the server (it connects lazily) fails each
// call so, and closes at once. Skipped without Harness.Silent.
func testSilentServer(e *env) {
	if e.h.Silent == nil {
		e.t.Skip("the harness sets no Silent")
	}
	const open = 500 * time.Millisecond
	var b simba.Backend
	var err error
	d := took(func() {
		ctx, cancel := context.WithTimeout(e.t.Context(), open)
		defer cancel()
		b, err = e.h.Silent(ctx, e.t)
	})
	if err != nil {
		if d > open+silentSlack {
			e.t.Errorf("open of a silent server with a context of %v failed after %v", open, d.Round(time.Millisecond))
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			e.t.Errorf("open of a silent server = %v, want an error matching context.DeadlineExceeded", err)
		}
		return
	}
	for op, call := range calls(b, "0123456789abcdef0123456789abcdef", e.name("n")) {
		switch op {
		case "KeepAlive", "Acquire", "Release", "JoinGroup", "LeaveGroup", "CloseSession":
			// A backend may know without asking that it opened no such
			// session.
		default:
			e.wantSilenceError(op, call)
		}
	}
	e.closeSoon(b)
}

// closeSoon closes b, when it is an io.Closer, and fails unless Close
// returned within closeWithin.
func (e *env) closeSoon(b simba.Backend) {
	e.t.Helper()
	c, ok := b.(io.Closer)
	if !ok {
		return
	}
	e.closing(b)
	var err error
	if d := took(func() { err = c.Close() }); d > closeWithin {
		e.t.Errorf("Close with a silent server took %v, want at most %v", d.Round(time.Millisecond), closeWithin)
	}
	if err != nil {
		e.t.Logf("Close with a silent server: %v", err)
	}
}

// testServerGoesSilent: the server of a working backend stops answering.
// Every call returns soon after its context ends, with a transient error;
// Close returns soon with calls in flight under a long context, which
// then end, and a release watch fires. Skipped without Harness.Silenced.
func testServerGoesSilent(e *env) {
	if e.h.Silenced == nil {
		e.t.Skip("the harness sets no Silenced")
	}
	b, silence := e.h.Silenced(e.t)
	s := e.openLong(b)
	n := e.name("held")
	tok := s.win(n)
	watch := e.watchHeld(b, n)
	silence()
	m := calls(b, s.id, e.name("other"))
	m["Release"] = func(ctx context.Context) error { return b.Release(ctx, s.id, n, tok) }
	for _, op := range inOrder(m) {
		e.wantSilenceError(op, m[op])
	}

	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	inFlight := []<-chan outcome[struct{}]{
		async(func() (struct{}, error) {
			return struct{}{}, second(b.KeepAlive(ctx, s.id, simba.KeepAliveRequest{Lease: s.lease}))
		}),
		async(func() (struct{}, error) { return struct{}{}, second(b.Acquire(ctx, s.id, e.name("other"))) }),
	}
	time.Sleep(100 * time.Millisecond) // they reach the wire
	e.closeSoon(b)
	if _, ok := b.(io.Closer); !ok {
		return
	}
	for _, ch := range inFlight {
		select {
		case o := <-ch:
			if o.err == nil {
				e.t.Error("a call in flight on a silent server succeeded")
			}
		case <-time.After(silentSlack):
			e.t.Fatalf("a call in flight on a silent server still runs %v after Close", silentSlack)
		}
	}
	e.wantFired(watch, "Close")
}

// watchHeld returns a watch of the release of n, held by a session of b
// or by none yet, that lasts until the check ends; nil when b is no
// simba.ReleaseNotifier.
func (e *env) watchHeld(b simba.Backend, n string) <-chan struct{} {
	e.t.Helper()
	w, ok := b.(simba.ReleaseNotifier)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(e.t.Context())
	e.t.Cleanup(cancel)
	ch, err := w.WatchRelease(ctx, n)
	if errors.Is(err, simba.ErrNotSupported) {
		return nil // no broadcasts here (see testWatchRelease)
	}
	if err != nil {
		e.t.Fatalf("WatchRelease(%q): %v", n, err)
	}
	return ch
}

// wantFired fails unless watch, when not nil, fires within 5s of what.
func (e *env) wantFired(watch <-chan struct{}, what string) {
	e.t.Helper()
	if watch == nil {
		return
	}
	select {
	case <-watch:
	case <-time.After(5 * time.Second):
		e.t.Errorf("a release watch made before %s did not fire within 5s of it", what)
	}
}
