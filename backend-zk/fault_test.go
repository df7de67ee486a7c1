package simbazk

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// newProxiedBackend returns a backend that reaches the test server through
// a proxy the test can cut, and a backend on the server directly, both
// under one root.
func newProxiedBackend(t *testing.T) (viaProxy, direct *Backend, p *proxy) {
	t.Helper()
	direct, servers := newTestBackend(t, Options{})
	p = newProxy(t, servers[0])
	viaProxy, err := New([]string{p.addr()}, Options{Root: direct.Root(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viaProxy.Close() })
	return viaProxy, direct, p
}

func TestServerDownAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now

	b, err := New([]string{addr}, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.OpenSession(c, lease)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("OpenSession with the server down = %v, want a deadline error naming the refused connection", err)
	}
	if took > 2*time.Second {
		t.Fatalf("OpenSession took %v, want about the ctx deadline (1.5s)", took)
	}
	t.Logf("error after %v: %v", took.Round(time.Millisecond), err)
}

func TestExpiresWithoutKeepAlive(t *testing.T) {
	// The Zookeeper client's pings must not keep a session alive: only the
	// backend's calls do, as the SPI requires.
	b, _ := newTestBackend(t, Options{})
	a, c := mustOpen(t, b, lease), mustOpen(t, b, 30*time.Second)
	mustAcquire(t, b, a, "x")
	deadline := time.Now().Add(4 * lease)
	for {
		if r := mustAcquire(t, b, c, "x"); r.Won {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session with a %v lease still holds its lease after %v without keep-alive", lease, 4*lease)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantExpiredForever(t, b, a)
}

// TestIdleSessionAfterOpenExpires: a session opened and then left alone
// (no call at all, not even a keep-alive) must expire after its timeout.
// The read deadline armed while the connect response was read must not
// outlive the handshake: it would end the idle connection after one
// response timeout, and the reconnect would renew the session on the
// server (R-SES-3).
func TestIdleSessionAfterOpenExpires(t *testing.T) {
	var dials atomic.Int32
	b, _ := newTestBackend(t, Options{Dialer: func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, address)
	}})
	const timeout = 3 * time.Second
	g, err := b.OpenSession(ctx(t), timeout)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	if g.Remaining != timeout {
		t.Skipf("server negotiated %v, want %v", g.Remaining, timeout)
	}
	// Past the timeout (and the server's tick), before a second response
	// timeout would have ended a reconnected connection again.
	const idle = timeout * 13 / 10
	time.Sleep(idle)
	if n := dials.Load(); n != 1 {
		t.Errorf("an idle session dialed %d times in %v, want once: a reconnect renews it", n, idle)
	}
	_, err = b.KeepAlive(ctx(t), g.ID, simba.KeepAliveRequest{})
	if !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("KeepAlive %v after the open of a %v session never renewed = %v, want ErrSessionExpired", idle, timeout, err)
	}
}

func TestKeepAliveKeepsSession(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	a, c := mustOpen(t, b, lease), mustOpen(t, b, 30*time.Second)
	r := mustAcquire(t, b, a, "x")
	for end := time.Now().Add(3 * lease); time.Now().Before(end); time.Sleep(lease / 3) {
		if got := owned(t, b, a, "x")["x"]; got != r.Token {
			t.Fatalf("KeepAlive owns x at %d, want %d", got, r.Token)
		}
	}
	if r := mustAcquire(t, b, c, "x"); r.Won {
		t.Fatal("a kept-alive session lost its lease")
	}
}

// wantExpiredForever checks that session s is refused as expired, now and
// a while later.
func wantExpiredForever(t *testing.T, b *Backend, s simba.SessionID) {
	t.Helper()
	for i := range 3 {
		if i > 0 {
			time.Sleep(lease / 2)
		}
		if _, err := b.KeepAlive(ctx(t), s, simba.KeepAliveRequest{Lease: lease}); !errors.Is(err, simba.ErrSessionExpired) {
			t.Fatalf("KeepAlive of the expired session = %v, want ErrSessionExpired", err)
		}
		if _, err := b.Acquire(ctx(t), s, "other"); !errors.Is(err, simba.ErrSessionExpired) {
			t.Fatalf("Acquire on the expired session = %v, want ErrSessionExpired", err)
		}
		if _, err := b.JoinGroup(ctx(t), s, "g"); !errors.Is(err, simba.ErrSessionExpired) {
			t.Fatalf("JoinGroup on the expired session = %v, want ErrSessionExpired", err)
		}
	}
}

func TestShortConnectionLoss(t *testing.T) {
	b, direct, p := newProxiedBackend(t)
	s := mustOpen(t, b, lease)
	r := mustAcquire(t, b, s, "x")
	other := mustOpen(t, direct, lease)

	p.Cut()
	time.Sleep(lease / 4)
	p.Restore()

	// The session reconnects with the same id and keeps its lease.
	c, cancel := context.WithTimeout(context.Background(), lease/2)
	defer cancel()
	var err error
	for {
		if _, err = b.KeepAlive(c, s, simba.KeepAliveRequest{Lease: lease}); err == nil || c.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("KeepAlive after a %v cut: %v", lease/4, err)
	}
	if got := owned(t, b, s, "x")["x"]; got != r.Token {
		t.Fatalf("KeepAlive owns x at %d, want %d", got, r.Token)
	}
	if r := mustAcquire(t, direct, other, "x"); r.Won {
		t.Fatal("lease taken over after a short connection loss")
	}
}

func TestBlackHoledConnection(t *testing.T) {
	// Pings are not sent, so only a pending request can reveal a
	// connection that went silent: it is dropped after 2/3 of the session
	// timeout and the session goes on over a new one (dialed again after a
	// twentieth of the session timeout, see hostList).
	const lease = 6 * time.Second
	b, _, p := newProxiedBackend(t)
	s := mustOpen(t, b, lease)
	r := mustAcquire(t, b, s, "x")

	p.BlackHole()
	start := time.Now()
	c, cancel := context.WithTimeout(context.Background(), lease)
	_, err := b.KeepAlive(c, s, simba.KeepAliveRequest{Lease: lease})
	cancel()
	if err == nil || errors.Is(err, simba.ErrSessionExpired) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("KeepAlive over a black hole = %v, want the connection dropped before the ctx deadline", err)
	}
	t.Logf("silent connection dropped after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if got := owned(t, b, s, "x")["x"]; got != r.Token {
		t.Fatalf("KeepAlive on the new connection owns x at %d, want %d", got, r.Token)
	}
}

func TestLongConnectionLoss(t *testing.T) {
	b, direct, p := newProxiedBackend(t)
	s := mustOpen(t, b, lease)
	mustAcquire(t, b, s, "x")
	other := mustOpen(t, direct, 30*time.Second)

	p.Cut()
	// While cut, keep-alives fail but are not "expired": the client
	// cannot know yet.
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := b.KeepAlive(c, s, simba.KeepAliveRequest{Lease: lease})
	cancel()
	if err == nil || errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("KeepAlive while cut = %v, want a transient error", err)
	}
	// The server expires the session after its timeout; the lease frees.
	deadline := time.Now().Add(4 * lease)
	for !mustAcquire(t, direct, other, "x").Won {
		if time.Now().After(deadline) {
			t.Fatal("lease not freed after the session timeout")
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Restore()
	// Back online: the client learns the session expired, for good.
	deadline = time.Now().Add(4 * lease)
	for {
		c, cancel := context.WithTimeout(context.Background(), lease/2)
		_, err := b.KeepAlive(c, s, simba.KeepAliveRequest{Lease: lease})
		cancel()
		if errors.Is(err, simba.ErrSessionExpired) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("KeepAlive after reconnecting = %v, want ErrSessionExpired", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantExpiredForever(t, b, s)
	// The old connection did not open a replacement session that could
	// take anything: a new session is needed and works.
	s2 := mustOpen(t, b, lease)
	if s2 == s {
		t.Fatalf("new session reused the id %s", s)
	}
	if r := mustAcquire(t, b, s2, "y"); !r.Won {
		t.Fatal("new session cannot acquire")
	}
}

func TestCappedSessionTimeout(t *testing.T) {
	servers := testServers(t, "SIMBA_TEST_ZK_CAPPED_SERVERS")
	b, err := New(servers, Options{Root: testRoot(t, servers), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g, err := b.OpenSession(ctx(t), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if g.Remaining <= 0 || g.Remaining > 4*time.Second {
		t.Fatalf("OpenSession(10s) on a server capped at 4s granted %v, want (0, 4s]", g.Remaining)
	}
	r, err := b.KeepAlive(ctx(t), g.ID, simba.KeepAliveRequest{Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining != g.Remaining {
		t.Fatalf("KeepAlive Remaining = %v, want the negotiated %v", r.Remaining, g.Remaining)
	}
}

// TestExpiredAtFirstConnect is a server that answers the connect request
// with session id 0, as Zookeeper does for an expired session. OpenSession
// is held between the start of its connection and its record of it, long
// enough for the expiry to come first: the close that the expiry starts
// must wait for that record (before, it read the connection unsynchronised,
// which -race reports, and could find it nil).
func TestExpiredAtFirstConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var reply [4 + 4 + 4 + 8 + 4 + 16]byte
	binary.BigEndian.PutUint32(reply[0:4], uint32(len(reply)-4))
	binary.BigEndian.PutUint32(reply[8:12], 4000) // timeout in ms; session id 0
	binary.BigEndian.PutUint32(reply[20:24], 16)
	answerWith(t, ln, string(reply[:]))

	b, err := New([]string{ln.Addr().String()}, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	p := newPauser(t, b)
	p.arm("open session")
	opened := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopWait)
		defer cancel()
		_, err := b.OpenSession(ctx, lease)
		opened <- err
	}()
	<-p.paused
	time.Sleep(held) // the connect response arrives meanwhile
	p.proceed()
	if err := <-opened; !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("OpenSession answered with session id 0 = %v, want ErrSessionExpired", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestCloseAfterHolderOnSilentServer is a backend made with New on a server
// that accepts connections and never answers (Open would have refused it).
// Holder dials the read connection, whose set-up requests are queued
// behind a connect request that gets no answer; once Holder gave up, Close
// must still return within its bound (the read connection's grace, then
// the library's second), not after the read connection's session timeout.
func TestCloseAfterHolderOnSilentServer(t *testing.T) {
	b, err := New([]string{backendtest.SilentListener(t)}, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, _, err = b.Holder(c, "x")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Holder on a silent server = %v, want context.DeadlineExceeded", err)
	}
	within(t, 2500*time.Millisecond, "Close after a Holder call on a silent server", func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}
