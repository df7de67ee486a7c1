package simbazk

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testServers returns the servers named by env var key. Without it the
// test is skipped, or fails when CI is set.
func testServers(t testing.TB, key string) []string {
	t.Helper()
	return strings.Split(backendtest.ServerEnv(t, key), ",")
}

// quiet is a logger for tests: debug records are dropped unless -v.
func quiet() *slog.Logger {
	if testing.Verbose() && os.Getenv("SIMBA_TEST_ZK_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testAuth is the digest identity of the tests that use one; the cleanup
// of every test root authenticates with it.
const testAuth = "simba:s3cret"

// testRoot returns a root path of its own for one test, removed (with
// everything under it) when the test ends.
func testRoot(t testing.TB, servers []string) string {
	root := "/simba-test/" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + randomHex(4)
	t.Cleanup(func() {
		a := dialAdmin(t, servers)
		defer a.close()
		if err := a.conn.AddAuth("digest", []byte(testAuth)); err != nil {
			t.Errorf("admin auth: %v", err)
		}
		a.removeAll(root)
	})
	return root
}

// newTestBackend returns a backend on SIMBA_TEST_ZK_SERVERS under a fresh
// root, closed when the test ends.
func newTestBackend(t testing.TB, opts Options) (*Backend, []string) {
	t.Helper()
	servers := testServers(t, "SIMBA_TEST_ZK_SERVERS")
	if opts.Root == "" {
		opts.Root = testRoot(t, servers)
	}
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	b, err := New(servers, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, servers
}

// admin is a plain Zookeeper connection the tests use to look at and
// tamper with the nodes behind the backend's back.
type admin struct {
	t      testing.TB
	conn   *zk.Conn
	events <-chan zk.Event
}

func dialAdmin(t testing.TB, servers []string) *admin {
	t.Helper()
	conn, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(zkLogger{quiet()}))
	if err != nil {
		t.Fatalf("admin connect: %v", err)
	}
	return &admin{t: t, conn: conn, events: events}
}

func (a *admin) close() {
	a.conn.Close()
	for range a.events {
	}
}

// removeAll deletes path and everything under it.
func (a *admin) removeAll(path string) {
	children, _, err := a.conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return
	}
	if err != nil {
		a.t.Errorf("admin: children of %s: %v", path, err)
		return
	}
	for _, c := range children {
		a.removeAll(path + "/" + c)
	}
	if err := a.conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		a.t.Errorf("admin: delete %s: %v", path, err)
	}
}

// ctx returns a context for one backend call in a test.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// mustOpen opens a session with the given lease.
func mustOpen(t testing.TB, b *Backend, lease time.Duration) simba.SessionID {
	t.Helper()
	g, err := b.OpenSession(ctx(t), lease)
	if err != nil {
		t.Fatalf("OpenSession(%v): %v", lease, err)
	}
	return g.ID
}

func mustAcquire(t testing.TB, b *Backend, s simba.SessionID, name string) simba.AcquireResult {
	t.Helper()
	r, err := b.Acquire(ctx(t), s, name)
	if err != nil {
		t.Fatalf("Acquire(%s, %q): %v", s, name, err)
	}
	return r
}

// mustKeepAlive renews s with req, or with an empty request.
func mustKeepAlive(t testing.TB, b *Backend, s simba.SessionID, req ...simba.KeepAliveRequest) simba.KeepAliveReply {
	t.Helper()
	var r simba.KeepAliveReply
	var err error
	if len(req) > 0 {
		r, err = b.KeepAlive(ctx(t), s, req[0])
	} else {
		r, err = b.KeepAlive(ctx(t), s, simba.KeepAliveRequest{})
	}
	if err != nil {
		t.Fatalf("KeepAlive(%s): %v", s, err)
	}
	return r
}

// owned returns which of names session s owns, and at which token: the
// Owned of a keep-alive that sends them as unsure.
func owned(t testing.TB, b *Backend, s simba.SessionID, names ...string) map[string]uint64 {
	t.Helper()
	o := mustKeepAlive(t, b, s, simba.KeepAliveRequest{Unsure: names}).Owned
	if o == nil {
		o = map[string]uint64{}
	}
	return o
}

// requests is how many requests (pings excluded) session s has sent.
func requests(t testing.TB, b *Backend, s simba.SessionID) int64 {
	t.Helper()
	ss, err := b.session(s)
	if err != nil {
		t.Fatalf("session %s: %v", s, err)
	}
	return ss.requests.Load()
}

// proxy is a TCP proxy to a Zookeeper server that a test can cut: Cut
// closes every connection and refuses new ones until Restore; BlackHole
// silently drops the traffic of the open ones.
type proxy struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup

	mu          sync.Mutex
	cut         bool
	stale       bool // new connections' set-watches claim to have seen every change
	conns       map[net.Conn]struct{}
	gen         int // generation of new connections
	frozenBelow int // connections of an older generation are black holes
}

func newProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		u, err := net.DialTimeout("tcp", p.upstream, time.Second)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		gen, stale := p.gen, p.stale
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 && !p.frozen(gen) {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = dst.Close()
			_ = src.Close()
		}
		if stale {
			p.wg.Go(func() { staleSetWatches(u, c) })
		} else {
			p.wg.Go(func() { pipe(u, c) })
		}
		p.wg.Go(func() { pipe(c, u) })
	}
}

// Cut closes every proxied connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// BlackHole makes every open connection drop all it carries, in both
// directions, without closing it; new connections work.
func (p *proxy) BlackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	p.frozenBelow = p.gen
}

func (p *proxy) frozen(gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return gen < p.frozenBelow
}

// StaleSetWatches makes the set-watches requests of later connections
// claim that the client has seen every change (the highest zxid), as the
// Zookeeper client does when a response's zxid reaches it before it builds
// that request: the server then fires none of the watches for the changes
// made while the client was away.
func (p *proxy) StaleSetWatches() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stale = true
}

// staleSetWatches copies the client's frames to the server, the relative
// zxid of each set-watches request replaced by the highest one.
func staleSetWatches(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	const opSetWatches = 101
	var buf []byte
	first := true // the connect request has no request header
	chunk := make([]byte, 32<<10)
	for {
		n, err := src.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for len(buf) >= 4 {
			size := 4 + int(binary.BigEndian.Uint32(buf[:4]))
			if len(buf) < size {
				break
			}
			frame := buf[:size]
			if !first && size >= 4+8+8 && int32(binary.BigEndian.Uint32(frame[8:12])) == opSetWatches {
				binary.BigEndian.PutUint64(frame[12:20], math.MaxInt64)
			}
			first = false
			if _, werr := dst.Write(frame); werr != nil {
				return
			}
			buf = buf[size:]
		}
		if err != nil {
			return
		}
	}
}

// Restore accepts connections again.
func (p *proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func TestReconnectPauseLetsAnUnrenewedSessionExpire(t *testing.T) {
	const timeout = time.Second
	if got := reconnectPause(timeout, 300*time.Millisecond); got != 50*time.Millisecond {
		t.Fatalf("pause of a session renewed 300ms ago = %v, want 50ms", got)
	}
	if got := reconnectPause(timeout, timeout); got != timeout {
		t.Fatalf("pause of a session renewed a timeout ago = %v, want the timeout: a quick reconnect would renew it", got)
	}
	if got := reconnectPause(100*time.Millisecond, 0); got != 10*time.Millisecond {
		t.Fatalf("pause of a 100ms session = %v, want the 10ms floor", got)
	}
}
