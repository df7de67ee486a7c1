package simbazk

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The tests of a session on several servers. SIMBA_TEST_ZK_ENSEMBLE names
// the members of a running ensemble ("host:port,host:port,host:port", as
// the robustness suite's topology starts one); without it the tests that
// need no real ensemble run on SIMBA_TEST_ZK_SERVERS behind as many
// proxies.

// ensembleLease is the lease of these tests: as short as the test servers
// grant, so that a reconnect that waits too long shows as an expiry.
const ensembleLease = time.Second

// ensembleMembers returns the members of SIMBA_TEST_ZK_ENSEMBLE, or, when
// needEnsemble is false and it is not set, the test server three times.
func ensembleMembers(t *testing.T, needEnsemble bool) []string {
	t.Helper()
	if v := os.Getenv("SIMBA_TEST_ZK_ENSEMBLE"); v != "" {
		return strings.Split(v, ",")
	}
	if needEnsemble {
		t.Skip("SIMBA_TEST_ZK_ENSEMBLE is not set (a running ensemble: go test -run TestZKEnsemble ./internal/topology in tools/chaos prints one)")
	}
	s := testServers(t, "SIMBA_TEST_ZK_SERVERS")[0]
	return []string{s, s, s}
}

// newEnsembleBackend returns a backend that reaches each member through a
// proxy of its own, the proxies, and a backend on the members directly,
// both under one root.
func newEnsembleBackend(t *testing.T, members []string) (viaProxies, direct *Backend, proxies []*proxy) {
	t.Helper()
	direct, err := New(members, Options{Root: testRoot(t, members), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	addrs := make([]string, 0, len(members))
	for _, m := range members {
		p := newProxy(t, m)
		proxies = append(proxies, p)
		addrs = append(addrs, p.addr())
	}
	viaProxies, err = New(addrs, Options{Root: direct.Root(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viaProxies.Close() })
	return viaProxies, direct, proxies
}

// open is how many connections p carries now.
func (p *proxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2 // each is a client and an upstream connection
}

// keepAliveWithin retries KeepAlive of s, holding x at token, until it
// succeeds or d passed since start, and returns its last reply and error.
func keepAliveWithin(b *Backend, s simba.SessionID, token uint64, start time.Time, d time.Duration) (simba.KeepAliveReply, error) {
	c, cancel := context.WithDeadline(context.Background(), start.Add(d))
	defer cancel()
	for {
		reply, err := b.KeepAlive(c, s, simba.KeepAliveRequest{Held: map[string]uint64{"x": token}, Generation: 1})
		if err == nil || c.Err() != nil || errors.Is(err, simba.ErrSessionExpired) {
			return reply, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReconnectAfterEveryServerRefused cuts every server for a while, as
// the members of an ensemble close their client connections and refuse
// new ones while they elect a leader. The session must come back, with
// its lease, as soon as one answers again: it has its session timeout
// for that, and must not spend it waiting.
func TestReconnectAfterEveryServerRefused(t *testing.T) {
	b, direct, proxies := newEnsembleBackend(t, ensembleMembers(t, false))
	g, err := b.OpenSession(ctx(t), ensembleLease)
	if err != nil {
		t.Fatal(err)
	}
	if g.Remaining != ensembleLease {
		t.Skipf("the servers grant %v for a %v session", g.Remaining, ensembleLease)
	}
	r := mustAcquire(t, b, g.ID, "x")
	other := mustOpen(t, direct, 10*time.Second)

	const outage = 300 * time.Millisecond
	start := time.Now()
	for _, p := range proxies {
		p.Cut()
	}
	time.Sleep(outage)
	for _, p := range proxies {
		p.Restore()
	}
	// Back within the session timeout, with room to spare: a keep-alive
	// must be answered before 2/3 of it (when the engine's own deadline
	// is near) has passed since the cut.
	reply, err := keepAliveWithin(b, g.ID, r.Token, start, ensembleLease*2/3)
	if err != nil {
		t.Fatalf("KeepAlive %v after a %v outage of every server: %v", time.Since(start).Round(time.Millisecond), outage, err)
	}
	t.Logf("keep-alive answered %v after the cut", time.Since(start).Round(time.Millisecond))
	if len(reply.Lost) != 0 {
		t.Fatalf("KeepAlive lost %v, want none", reply.Lost)
	}
	if got := mustAcquire(t, direct, other, "x"); got.Won {
		t.Fatal("lease taken over after an outage shorter than the session timeout")
	}
}

// TestSessionMovesToAnotherMember cuts the member the session is
// connected to, for good: the session must go on through another member
// at once, with its lease.
func TestSessionMovesToAnotherMember(t *testing.T) {
	b, direct, proxies := newEnsembleBackend(t, ensembleMembers(t, true))
	s := mustOpen(t, b, ensembleLease)
	r := mustAcquire(t, b, s, "x")
	other := mustOpen(t, direct, 10*time.Second)
	mustKeepAlive(t, b, s)

	var on *proxy
	for _, p := range proxies {
		if p.open() > 0 {
			on = p
		}
	}
	if on == nil {
		t.Fatal("no proxy carries the session's connection")
	}
	start := time.Now()
	on.Cut()
	reply, err := keepAliveWithin(b, s, r.Token, start, ensembleLease/3)
	if err != nil {
		t.Fatalf("KeepAlive %v after its member was cut: %v", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("keep-alive answered %v after the cut", time.Since(start).Round(time.Millisecond))
	if len(reply.Lost) != 0 {
		t.Fatalf("KeepAlive lost %v, want none", reply.Lost)
	}
	if got := mustAcquire(t, direct, other, "x"); got.Won {
		t.Fatal("lease taken over after the session moved")
	}
}

// TestQueueNodeLeftByLostConnection loses the watch connection of a
// backend just as it leaves the queue of a lease (its caller gave up, so
// its queue node is deleted): the delete is sent and its connection
// dropped before the answer. The node must not stay in the queue, where
// it would keep every backend queued after it from being woken by a
// release, for as long as the first backend lives.
func TestQueueNodeLeftByLostConnection(t *testing.T) {
	p1, direct, p := newProxiedBackend(t)
	holder := mustOpen(t, direct, 10*time.Second)
	r := mustAcquire(t, direct, holder, "x")

	gaveUp, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := p1.WatchRelease(gaveUp, "x"); err != nil {
		t.Fatal(err)
	}
	a := dialAdmin(t, testServers(t, "SIMBA_TEST_ZK_SERVERS"))
	defer a.close()
	queue := direct.opts.Root + "/waiters/x"
	if n := queueLen(t, a, queue); n != 1 {
		t.Fatalf("queue of x has %d nodes, want the first backend's", n)
	}

	p.BlackHole() // the delete goes out and is never answered...
	cancel()
	time.Sleep(200 * time.Millisecond)
	p.Cut() // ...and its connection drops
	time.Sleep(50 * time.Millisecond)
	p.Restore()
	// Let the watch connection reconnect and set its watches again before
	// it sends a request: the Zookeeper client reads its last zxid for
	// that without synchronisation, which the race detector would report
	// should the answer to a request queued meanwhile be read first.
	time.Sleep(300 * time.Millisecond)
	if _, _, err := p1.Holder(ctx(t), "x"); err != nil { // the watch connection is back
		t.Fatalf("Holder after the reconnect: %v", err)
	}

	// Another backend now waits for x and must be woken by its release.
	other, err := New(testServers(t, "SIMBA_TEST_ZK_SERVERS"), Options{Root: direct.Root(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	woken, err := other.WatchRelease(ctx(t), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.Release(ctx(t), holder, "x", r.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(2 * time.Second):
		t.Fatalf("the release of x did not wake the backend waiting for it; queue: %d nodes", queueLen(t, a, queue))
	}
}

// queueLen is the number of nodes in the queue dir of a lease.
func queueLen(t *testing.T, a *admin, dir string) int {
	t.Helper()
	children, _, err := a.conn.Children(dir)
	if err != nil {
		t.Fatalf("children of %s: %v", dir, err)
	}
	return len(children)
}

// TestLeaseCheckAcrossReconnect deletes a session's lease node by hand
// while the session is disconnected, and another session takes the lease;
// the session's watches are then set again on its new connection as if it
// had seen those changes already (what the Zookeeper client sends when the
// answer to a request queued during the outage reaches it before it builds
// that request). The next keep-alive must report the lease lost.
func TestLeaseCheckAcrossReconnect(t *testing.T) {
	b, direct, p := newProxiedBackend(t)
	s := mustOpen(t, b, 10*time.Second)
	tok := mustAcquire(t, b, s, "x").Token
	mustKeepAlive(t, b, s, simba.KeepAliveRequest{Held: map[string]uint64{"x": tok}, Generation: 1}) // the lease is under an exists-watch from here on
	a := dialAdmin(t, testServers(t, "SIMBA_TEST_ZK_SERVERS"))
	defer a.close()

	p.StaleSetWatches()
	p.Cut()
	if err := a.conn.Delete(direct.leasePath("x"), -1); err != nil {
		t.Fatal(err)
	}
	other := mustOpen(t, direct, 10*time.Second)
	if r := mustAcquire(t, direct, other, "x"); !r.Won {
		t.Fatal("another session cannot take the lease deleted by hand")
	}
	p.Restore()
	time.Sleep(300 * time.Millisecond) // reconnected, watches set again
	reply, err := keepAliveWithin(b, s, tok, time.Now(), 5*time.Second)
	if err != nil {
		t.Fatalf("KeepAlive after the reconnect: %v", err)
	}
	if len(reply.Lost) != 1 || reply.Lost[0] != "x" {
		t.Fatalf("KeepAlive after the reconnect lost %v, want x, whose node was deleted meanwhile", reply.Lost)
	}
}
