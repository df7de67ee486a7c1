package simbapg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// notifyFixture is a table prefix of its own with two backends on it, and
// the test's own pool.
type notifyFixture struct {
	t      *testing.T
	raw    string
	prefix string
	pool   *pgxpool.Pool
}

func newNotifyFixture(t *testing.T) *notifyFixture {
	t.Helper()
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_POSTGRES_URL")
	f := &notifyFixture{t: t, raw: raw, prefix: fmt.Sprintf("nt%08x_", rand.Uint32()), pool: newPool(t, raw, 0)}
	b, err := Open(t.Context(), raw, Options{TablePrefix: f.prefix, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	t.Cleanup(func() {
		for _, tbl := range sqlTables(f.prefix) {
			_, _ = f.pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+tbl)
		}
	})
	return f
}

func sqlTables(prefix string) []string {
	return []string{prefix + "session", prefix + "lease", prefix + "group_member", prefix + "lease_floor", prefix + "semaphore"}
}

// backend opens a backend with a pool of its own, closed when the test ends.
func (f *notifyFixture) backend() *Backend {
	f.t.Helper()
	return f.backendAt(f.raw, f.prefix)
}

// backendAt opens a backend on raw with the table prefix, closed when the
// test ends.
func (f *notifyFixture) backendAt(raw, prefix string) *Backend {
	f.t.Helper()
	b, err := Open(f.t.Context(), raw, Options{TablePrefix: prefix})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = b.Close() })
	return b
}

func (f *notifyFixture) session(b *Backend) simba.SessionID {
	f.t.Helper()
	g, err := b.OpenSession(f.t.Context(), time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	return g.ID
}

func (f *notifyFixture) win(b *Backend, s simba.SessionID, name string) uint64 {
	f.t.Helper()
	r, err := b.Acquire(f.t.Context(), s, name)
	if err != nil || !r.Won {
		f.t.Fatalf("Acquire(%q) = %+v, %v; want a win", name, r, err)
	}
	return r.Token
}

func (f *notifyFixture) watch(ctx context.Context, b *Backend, name string) <-chan struct{} {
	f.t.Helper()
	ch, err := b.WatchRelease(ctx, name)
	if err != nil {
		f.t.Fatalf("WatchRelease(%q): %v", name, err)
	}
	return ch
}

func (f *notifyFixture) watched(name string) bool {
	f.t.Helper()
	var w bool
	if err := f.pool.QueryRow(f.t.Context(), "SELECT watched FROM "+f.prefix+"lease WHERE name = $1", name).Scan(&w); err != nil {
		f.t.Fatal(err)
	}
	return w
}

func wantFired(t *testing.T, ch <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("the watch did not fire after %s", why)
	}
}

func wantOpen(t *testing.T, ch <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("the watch fired %s", why)
	default:
	}
}

// A watch marks the row; the release broadcasts it and the next owner
// clears the mark. A free or orphaned lease is reported at once.
func TestWatchReleaseMarksAndClears(t *testing.T) {
	f := newNotifyFixture(t)
	a, b := f.backend(), f.backend()
	sa, sb := f.session(a), f.session(b)

	wantFired(t, f.watch(t.Context(), b, "never-used"), "a watch of a name without a row")

	tok := f.win(a, sa, "job")
	if f.watched("job") {
		t.Fatal("a new lease row is marked watched")
	}
	ch := f.watch(t.Context(), b, "job")
	if !f.watched("job") {
		t.Fatal("the watch did not mark the row")
	}
	wantOpen(t, ch, "while the lease is held")
	if err := a.Release(t.Context(), sa, "job", tok); err != nil {
		t.Fatal(err)
	}
	wantFired(t, ch, "the release")
	wantFired(t, f.watch(t.Context(), b, "job"), "a watch of a released lease")

	f.win(b, sb, "job")
	if f.watched("job") {
		t.Fatal("the new owner did not clear the mark")
	}
	// The owner acquiring its own lease again keeps the mark.
	f.watch(t.Context(), a, "job")
	f.win(b, sb, "job")
	if !f.watched("job") {
		t.Fatal("the owner's own acquire cleared the mark of a waiter")
	}

	// An owner whose session ended without a release: at once.
	if _, err := f.pool.Exec(t.Context(), "UPDATE "+f.prefix+"session SET expires_at = now() - interval '1 second' WHERE id = $1", string(sb)); err != nil {
		t.Fatal(err)
	}
	wantFired(t, f.watch(t.Context(), a, "job"), "a watch of a lease whose owner expired")
}

// Only a watched release is broadcast, and closing a session broadcasts
// its watched leases.
func TestWatchReleaseBroadcastsOnlyWatched(t *testing.T) {
	f := newNotifyFixture(t)
	a, b := f.backend(), f.backend()
	sa := f.session(a)

	conn, err := pgx.Connect(t.Context(), f.raw)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(t.Context(), `LISTEN "`+f.prefix+`release"`); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n.Payload != "" { // "": a backend's probe of its listener
				return n.Payload
			}
		}
	}

	quiet := f.win(a, sa, "quiet")
	loud := f.win(a, sa, "loud")
	ch := f.watch(t.Context(), b, "loud")
	// Notifications arrive in commit order: the first one is the watched
	// release, though the unwatched one committed before it.
	if err := a.Release(t.Context(), sa, "quiet", quiet); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(t.Context(), sa, "loud", loud); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "loud" {
		t.Fatalf("first broadcast: %q, want %q (the unwatched release was broadcast)", got, "loud")
	}
	wantFired(t, ch, "the watched release")

	f.win(a, sa, "q2")
	f.win(a, sa, "l2")
	ch = f.watch(t.Context(), b, "l2")
	other := f.watch(t.Context(), b, "q2")
	if err := a.CloseSession(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{next(): true, next(): true}
	if !got["l2"] || !got["q2"] {
		t.Fatalf("CloseSession broadcast %v, want l2 and q2", got)
	}
	wantFired(t, ch, "the owner's CloseSession")
	wantFired(t, other, "the owner's CloseSession")
}

// A lost listening connection wakes every watch; the backend listens again
// and later releases reach new watches. A watch dropped by its context
// leaves nothing behind, and Close wakes the watches left.
func TestWatchReleaseSurvivesALostConnection(t *testing.T) {
	f := newNotifyFixture(t)
	a, b := f.backend(), f.backend()
	sa := f.session(a)
	tok := f.win(a, sa, "job")

	ch := f.watch(t.Context(), b, "job")
	var n int
	if err := f.pool.QueryRow(t.Context(),
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1`,
		`LISTEN "`+f.prefix+`release"`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminating the listening connection: %d terminated, %v", n, err)
	}
	wantFired(t, ch, "the listening connection was terminated")

	ch = f.watch(t.Context(), b, "job") // waits for the new connection
	if err := a.Release(t.Context(), sa, "job", tok); err != nil {
		t.Fatal(err)
	}
	wantFired(t, ch, "a release after the listener came back")

	tok = f.win(a, sa, "job")
	kept := f.watch(t.Context(), b, "job")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wantFired(t, kept, "the backend was closed")
	if _, err := b.WatchRelease(t.Context(), "job"); !errors.Is(err, ErrClosed) {
		t.Fatalf("WatchRelease after Close: %v, want ErrClosed", err)
	}
	if err := a.Release(t.Context(), sa, "job", tok); err != nil {
		t.Fatal(err)
	}
}

// A dropped watch leaves nothing registered; Close wakes the others, and a
// watch registered after Close is woken at once.
func TestListenerDropsAndCloses(t *testing.T) {
	l := newListener(newPool(t, "postgres://127.0.0.1:1/none", 1), "x_release")
	count := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, set := range l.watches {
			n += len(set)
		}
		return n
	}
	dropped, _, drop, _ := l.Listen(t.Context(), "a")
	kept, ready, _, _ := l.Listen(t.Context(), "a")
	other, _, dropOther, _ := l.Listen(t.Context(), "b")
	ctx, cancel := context.WithCancel(t.Context())
	ended, _, _, _ := l.Listen(ctx, "c")
	drop()
	drop()
	dropOther()
	cancel()
	for deadline := time.Now().Add(10 * time.Second); count() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches registered after three of four were dropped or their context ended, want 1", count())
		}
	}
	wantOpen(t, ready, "ready with no server to listen on")
	l.Close()
	wantFired(t, kept, "Close")
	wantOpen(t, dropped, "after it was dropped")
	wantOpen(t, other, "after it was dropped")
	wantOpen(t, ended, "after its context ended")
	late, _, _, _ := l.Listen(t.Context(), "a")
	wantFired(t, late, "a Listen after Close")
	if n := count(); n != 0 {
		t.Fatalf("%d watches registered after Close", n)
	}
}

func TestWatchReleaseRefusesBadNames(t *testing.T) {
	b, err := New(newPool(t, "postgres://127.0.0.1:1/none", 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	var ne *simba.NameError
	if _, err := b.WatchRelease(t.Context(), "bad name\x00"); !errors.As(err, &ne) {
		t.Fatalf("WatchRelease of a bad name: %v, want a *simba.NameError", err)
	}
}

// Through the engine, a lock released on one client is taken by the
// waiter of another at once, not at its next regular attempt.
func TestWatchReleaseHandsALockOver(t *testing.T) {
	f := newNotifyFixture(t)
	cfg := simba.Config{LeaseDuration: 20 * time.Second} // regular attempts every 3.3 s or so
	clients := make([]*simba.Client, 2)
	for i := range clients {
		c, err := simba.New(f.backend(), simba.WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		clients[i] = c
	}
	held, err := clients[0].Lock("handover").Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan time.Time, 1)
	go func() {
		lt, err := clients[1].Lock("handover").Acquire(t.Context())
		if err != nil {
			t.Error(err)
			close(won)
			return
		}
		won <- time.Now()
		_ = lt.Release(context.Background())
	}()
	// The waiter's attempt lost and its watch marked the row.
	for deadline := time.Now().Add(10 * time.Second); !f.watched("handover"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never watched the lease")
		}
	}
	start := time.Now()
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	at, ok := <-won
	if !ok {
		return
	}
	if d := at.Sub(start); d > time.Second {
		t.Fatalf("the waiter won %v after the release; a broadcast takes milliseconds", d)
	}
}

// A CloseSession whose statement is under way when a watch marks the row
// (its session delete waits here for a FOR SHARE lock the test holds, and
// the watch sees the session still live) still broadcasts the release.
func TestCloseSessionBroadcastsAConcurrentWatch(t *testing.T) {
	f := newNotifyFixture(t)
	a, b := f.backend(), f.backend()
	sa := f.session(a)
	f.win(a, sa, "job")
	tx, err := f.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM "+f.prefix+"session WHERE id = $1 FOR SHARE", string(sa)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- a.CloseSession(context.Background(), sa) }()
	waitForLockWait(t, f)
	ch := f.watch(t.Context(), b, "job")
	wantOpen(t, ch, "while the session closes behind a lock")
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	wantFired(t, ch, "the close of the owner's session")
}

// waitForLockWait waits until a statement of the fixture's tables waits
// for a lock.
func waitForLockWait(t *testing.T, f *notifyFixture) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, f.prefix).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no statement waits for the lock")
}

// Backends whose table prefixes differ in case alone share the tables
// (PostgreSQL folds unquoted names), and so the release channel.
func TestWatchReleaseChannelFollowsTheTables(t *testing.T) {
	f := newNotifyFixture(t)
	upper, lower := f.backendAt(f.raw, strings.ToUpper(f.prefix)), f.backend()
	s := f.session(upper)
	tok := f.win(upper, s, "job")
	ch := f.watch(t.Context(), lower, "job")
	wantOpen(t, ch, "while the lease is held")
	if err := upper.Release(t.Context(), s, "job", tok); err != nil {
		t.Fatal(err)
	}
	wantFired(t, ch, "a release by the backend with the upper-case prefix")
}

// A probe that cannot get a pool connection in time says nothing about
// the listening connection: once the pool is quick again, watches are
// taken, not refused as behind a pooler.
func TestListenerSlowPoolIsNotDeaf(t *testing.T) {
	f := newNotifyFixture(t)
	var slow atomic.Bool
	b := f.hookedBackend(func(ctx context.Context) error {
		if !slow.Load() {
			return nil
		}
		select {
		case <-time.After(probeWait + 500*time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	s := f.session(b)
	tok := f.win(b, s, "job")
	slow.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 2*probeWait)
	_, err := b.WatchRelease(ctx, "job")
	cancel()
	t.Logf("a watch while the pool is slow: %v", err)
	slow.Store(false)
	f.heardOnceListening(b, b, s, "job", tok)
}

// hookedBackend opens a backend on a pool that runs hook before it hands
// out a connection; an error of hook fails the call that asked for it.
func (f *notifyFixture) hookedBackend(hook func(ctx context.Context) error) *Backend {
	t := f.t
	t.Helper()
	cfg, err := pgxpool.ParseConfig(f.raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PrepareConn = func(ctx context.Context, _ *pgx.Conn) (bool, error) { return true, hook(ctx) }
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := New(pool, Options{TablePrefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() }) // before the pool's Close
	return b
}

// A watch that no listening connection serves in time says why the last
// attempt to listen failed.
func TestWatchReleaseSaysWhyItCannotListen(t *testing.T) {
	f := newNotifyFixture(t)
	var refuse atomic.Bool
	refused := errors.New("connection refused by the test's pool")
	b := f.hookedBackend(func(context.Context) error {
		if refuse.Load() {
			return refused
		}
		return nil
	})
	s := f.session(b)
	f.win(b, s, "job")
	refuse.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := b.WatchRelease(ctx, "job")
	if err == nil || !strings.Contains(err.Error(), refused.Error()) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WatchRelease with a pool that refuses = %v, want the pool's error and DeadlineExceeded", err)
	}
}

// heardOnceListening watches name on b until a watch is taken (within
// 20 s; never refused as not supported), then releases the term tok of
// session s of holder and wants the watch to fire.
func (f *notifyFixture) heardOnceListening(b, holder *Backend, s simba.SessionID, name string, tok uint64) {
	t := f.t
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ch, err := b.WatchRelease(t.Context(), name)
		if errors.Is(err, simba.ErrNotSupported) {
			t.Fatalf("a watch once a connection can listen: %v", err)
		}
		if err == nil {
			wantOpen(t, ch, "while the lease is held")
			if err := holder.Release(t.Context(), s, name, tok); err != nil {
				t.Fatal(err)
			}
			wantFired(t, ch, "the release")
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no watch taken within 20s: %v", err)
		}
	}
}

// A listening connection that goes quiet without an error (its server
// frozen, its path cut without a reset) is found by the next probe: its
// watches wake, and a new connection listens.
func TestListenerReprobesAQuietConnection(t *testing.T) {
	f := newNotifyFixture(t)
	saved := reprobeEvery
	reprobeEvery = 300 * time.Millisecond
	t.Cleanup(func() { reprobeEvery = saved }) // after the backends' Close
	u := parseURL(t, f.raw)
	p := newFreezeProxy(t, u.Host)
	u.Host = p.addr
	b, other := f.backendAt(u.String(), f.prefix), f.backend()
	s := f.session(other)
	tok := f.win(other, s, "job")
	ch := f.watch(t.Context(), b, "job")
	p.freezeListeners()
	if err := other.Release(t.Context(), s, "job", tok); err != nil {
		t.Fatal(err)
	}
	wantFired(t, ch, "the listening connection went quiet")
	f.heardOnceListening(b, other, s, "job", f.win(other, s, "job"))
}

// freezeProxy forwards TCP connections to a server; freezeListeners stops
// forwarding anything to the connections that sent LISTEN so far, without
// closing them.
type freezeProxy struct {
	addr string
	ln   net.Listener
	mu   sync.Mutex
	all  []*proxied
	wg   sync.WaitGroup
}

type proxied struct {
	client, server net.Conn
	listens        atomic.Bool
	frozen         atomic.Bool
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{addr: ln.Addr().String(), ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			srv, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			pc := &proxied{client: c, server: srv}
			p.mu.Lock()
			p.all = append(p.all, pc)
			p.mu.Unlock()
			p.wg.Go(func() { pc.pump(c, srv, true) })
			p.wg.Go(func() { pc.pump(srv, c, false) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, pc := range p.all {
			_ = pc.client.Close()
			_ = pc.server.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// pump copies from src to dst; fromClient marks the client's direction,
// where a LISTEN marks the connection. A frozen connection's bytes are
// read and dropped, as a path that lost them would.
func (pc *proxied) pump(src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromClient && bytes.Contains(buf[:n], []byte("LISTEN ")) {
				pc.listens.Store(true)
			}
			if !pc.frozen.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *freezeProxy) freezeListeners() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.all {
		if pc.listens.Load() {
			pc.frozen.Store(true)
		}
	}
}
