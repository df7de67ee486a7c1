package simbazk

import (
	"context"
	"fmt"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// waiter is a session on a backend of its own that lost an Acquire of a
// name and watches its release, as a candidate does.
type waiter struct {
	b     *Backend
	id    simba.SessionID
	fired <-chan struct{}
}

func newWaiter(watchCtx context.Context, t *testing.T, holder *Backend, servers []string, name string) waiter {
	t.Helper()
	b := secondNode(t, holder, servers)
	id := mustOpen(t, b, 10*time.Second)
	if r := mustAcquire(t, b, id, name); r.Won {
		t.Fatalf("waiter won %q while it is held", name)
	}
	ch, err := b.WatchRelease(watchCtx, name)
	if err != nil {
		t.Fatalf("WatchRelease: %v", err)
	}
	return waiter{b: b, id: id, fired: ch}
}

// settled waits until the watch fired and the session's claim of name, if
// one was sent, was answered (it holds the name's lock until then).
func (w waiter) settled(t *testing.T, name string) *session {
	t.Helper()
	select {
	case <-w.fired:
	case <-time.After(5 * time.Second):
		t.Fatal("release watch not fired")
	}
	s, err := w.b.session(w.id)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := s.lockName(ctx(t), name, true)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	return s
}

// TestReleaseStagesTheWaitersCreate: when the node a session waits for is
// deleted, the session's create is sent as the watch fires, before the
// candidate asks; its Acquire then sends nothing and wins that node.
func TestReleaseStagesTheWaitersCreate(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	a := dialAdmin(t, servers)
	defer a.close()
	holder := mustOpen(t, b, 10*time.Second)
	const name = "staged"
	held := mustAcquire(t, b, holder, name)
	w := newWaiter(ctx(t), t, b, servers, name)

	if err := b.Release(ctx(t), holder, name, held.Token); err != nil {
		t.Fatal(err)
	}
	s := w.settled(t, name)
	ok, owner, czxid := a.node(w.b, name)
	if !ok || owner != s.zid.Load() {
		t.Fatalf("after the release watch fired: node exists=%v owner=%x, want created by the waiter (%x) before it asked", ok, owner, s.zid.Load())
	}
	before := requests(t, w.b, w.id)
	r := mustAcquire(t, w.b, w.id, name)
	if sent := requests(t, w.b, w.id) - before; sent != 0 {
		t.Errorf("Acquire after a staged create sent %d requests, want 0", sent)
	}
	if !r.Won || r.Token != uint64(czxid) || r.Token <= held.Token {
		t.Fatalf("Acquire = %+v, want won with the staged node's czxid %d (> %d)", r, czxid, held.Token)
	}
	if got := owned(t, w.b, w.id, name); got[name] != r.Token {
		t.Fatalf("KeepAlive owns %v, want %s:%d", got, name, r.Token)
	}
	if again := mustAcquire(t, w.b, w.id, name); !again.Won || again.Token <= r.Token {
		t.Fatalf("Acquire of a held lease = %+v, want a new term above %d", again, r.Token)
	}
}

// TestReleaseWakesOneWaiter: with n sessions (each on a backend of its
// own) waiting for one lease, a release wakes one backend, the first that
// queued: its watch fires and its session sends the one create of the
// handover, which wins; the other backends hear nothing and their sessions
// send nothing.
func TestReleaseWakesOneWaiter(t *testing.T) {
	for _, n := range []int{1, 10} {
		t.Run(fmt.Sprintf("waiters=%d", n), func(t *testing.T) {
			b, servers := newTestBackend(t, Options{})
			holder := mustOpen(t, b, 10*time.Second)
			const name = "herd"
			held := mustAcquire(t, b, holder, name)
			ws := make([]waiter, n)
			for i := range ws {
				ws[i] = newWaiter(ctx(t), t, b, servers, name)
			}
			before := make([]int64, n)
			for i, w := range ws {
				before[i] = requests(t, w.b, w.id)
			}
			if err := b.Release(ctx(t), holder, name, held.Token); err != nil {
				t.Fatal(err)
			}
			first := ws[0]
			first.settled(t, name)
			r := mustAcquire(t, first.b, first.id, name)
			if !r.Won || r.Token <= held.Token {
				t.Fatalf("first waiter's Acquire = %+v, want won above %d", r, held.Token)
			}
			var sent int64
			for i, w := range ws {
				sent += requests(t, w.b, w.id) - before[i]
			}
			if sent != 1 {
				t.Errorf("the %d waiting sessions sent %d requests for the handover, want 1 (the first one's create)", n, sent)
			}
			time.Sleep(200 * time.Millisecond) // room for a wrong wake-up to show
			for i, w := range ws[1:] {
				select {
				case <-w.fired:
					t.Errorf("waiter %d woken by a release that the first waiter took", i+1)
				default:
				}
			}
		})
	}
}

// TestUnclaimedCreateGivenBack: a staged create nobody asks for is deleted
// after claimHold, so the lease does not stay held by a session whose
// candidate does not know it; a watch whose caller gave up stages nothing.
func TestUnclaimedCreateGivenBack(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	a := dialAdmin(t, servers)
	defer a.close()
	holder := mustOpen(t, b, 10*time.Second)
	const name = "unclaimed"
	held := mustAcquire(t, b, holder, name)
	w := newWaiter(ctx(t), t, b, servers, name)
	if err := b.Release(ctx(t), holder, name, held.Token); err != nil {
		t.Fatal(err)
	}
	s := w.settled(t, name)
	ok, st, gone, err := a.conn.ExistsW(b.Root() + "/leases/" + name)
	if err != nil || !ok || st.EphemeralOwner != s.zid.Load() {
		t.Fatalf("staged node exists = %v (%v), want it created by the waiter", ok, err)
	}
	start := time.Now()
	select {
	case <-gone:
	case <-time.After(claimHold + 3*time.Second):
		t.Fatalf("staged node still held %v after the release, want it given back after %v", time.Since(start), claimHold)
	}
	if got := time.Since(start); got < claimHold/2 {
		t.Errorf("staged node given back after %v, want about %v", got, claimHold)
	}
	if r := mustAcquire(t, b, holder, name); !r.Won {
		t.Fatal("lease not free after the unclaimed create was given back")
	}

	// A waiter whose watch caller is gone sends no create.
	again := mustAcquire(t, b, holder, name)
	wctx, cancel := context.WithCancel(ctx(t))
	late := newWaiter(wctx, t, b, servers, name)
	cancel()
	before := requests(t, late.b, late.id)
	if err := b.Release(ctx(t), holder, name, again.Token); err != nil {
		t.Fatal(err)
	}
	if r := mustAcquire(t, b, holder, name); !r.Won {
		t.Error("the lease was taken by a waiter with no watch caller left")
	}
	if sent := requests(t, late.b, late.id) - before; sent != 0 {
		t.Errorf("a waiter with no watch caller left sent %d requests on the release, want 0", sent)
	}
}

// TestClaimGivenBackAfterConnectionLoss: a staged claim whose give-back
// fails because the connection is down is given back once it is up again,
// so the name does not stay held by a session whose keep-alive does not
// list it.
func TestClaimGivenBackAfterConnectionLoss(t *testing.T) {
	const name = "given-back-late"
	c := stageProxiedClaim(t, name)
	wb, direct, p, a, s := c.wb, c.direct, c.p, c.a, c.s
	p.Cut() // down when the claim is given back
	time.Sleep(claimHold + time.Second)
	p.Restore()
	c.awaitBack(t)
	other := mustOpen(t, direct, 10*time.Second)
	deadline := time.Now().Add(3 * claimHold)
	for {
		r := mustAcquire(t, direct, other, name)
		if r.Won {
			return
		}
		if time.Now().After(deadline) {
			ok, owner, _ := a.node(wb, name)
			t.Fatalf("the unclaimed create was not given back %v after the connection came back: node exists %v, owner %x (the waiter's session %x)",
				3*claimHold, ok, owner, s.zid.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWaitingBounded: the names a session lost stay in its waiting map
// only while they count (one session timeout), once the map grew.
func TestWaitingBounded(t *testing.T) {
	s := &session{waiting: make(map[string]time.Time)}
	s.timeout.Store(int64(time.Second))
	old := time.Now().Add(-2 * time.Second)
	for i := range 1000 {
		s.waiting[fmt.Sprintf("old-%d", i)] = old
	}
	for i := range 10 {
		s.noteLost(fmt.Sprintf("new-%d", i))
	}
	if len(s.waiting) != 10 {
		t.Fatalf("waiting holds %d names, want the 10 lost within the session timeout", len(s.waiting))
	}
	for i := range 200 {
		s.noteLost(fmt.Sprintf("more-%d", i))
	}
	if len(s.waiting) != 210 {
		t.Fatalf("waiting holds %d names, want 210 (all recent)", len(s.waiting))
	}
}

// TestStagedLossKeepsWaiting: an Acquire answered from a claim that lost
// (another session created the node first) counts as a new loss, so the
// session keeps claiming on later releases instead of dropping out of
// the waiters a session timeout after its last regular loss.
func TestStagedLossKeepsWaiting(t *testing.T) {
	s := &session{b: &Backend{leasesDir: "/simba/leases"}, waiting: make(map[string]time.Time), claims: make(map[string]*claim),
		names: make(map[string]*nameLock), nodes: make(map[string]node), fired: make(map[string]struct{})}
	s.timeout.Store(int64(time.Second))
	long := time.Now().Add(-time.Hour)
	s.waiting["n"] = long
	s.claims["n"] = &claim{timer: time.AfterFunc(time.Hour, func() {})}
	if r, err := s.acquire(ctx(t), "n", nil); err != nil || r.Won {
		t.Fatalf("acquire = %+v, %v; want a staged loss", r, err)
	}
	if at := s.waiting["n"]; !at.After(long) {
		t.Errorf("the staged loss left the session's last loss at %v", at)
	}
}

// TestClaimGiveBackRetryKeepsAnotherTerm: a give-back of a staged claim
// whose delete fails may still have been done by the server (its answer
// lost with the connection). The claim's node is then gone, and another
// session may hold the name by the time the give-back is tried again:
// every lease node is at version 1, so the retry must check the node's
// owner and czxid, and must not delete that session's node. (The admin's
// delete stands for the delete whose answer was lost.)
func TestClaimGiveBackRetryKeepsAnotherTerm(t *testing.T) {
	const name = "given-back-retry"
	c := stageProxiedClaim(t, name)
	wb, direct, p, a, w, s := c.wb, c.direct, c.p, c.a, c.w, c.s
	p.Cut() // the give-back fails
	if err := a.conn.Delete(wb.leasePath(name), -1); err != nil {
		t.Fatal(err)
	}
	other := mustOpen(t, direct, 10*time.Second)
	taken := mustAcquire(t, direct, other, name)
	if !taken.Won {
		t.Fatal("the name is not free after the claim's node went")
	}
	time.Sleep(claimHold + 500*time.Millisecond)
	p.Restore()
	c.awaitBack(t)
	if r := mustAcquire(t, wb, w, name); r.Won {
		t.Errorf("the waiter's Acquire won token %d while another session holds the name at %d", r.Token, taken.Token)
	}
	time.Sleep(2 * claimHold)
	if ok, owner, czxid := a.node(direct, name); !ok || czxid != int64(taken.Token) {
		t.Fatalf("the other session's node: exists %v, owner %x, czxid %d; want it kept at %d (the waiter's session is %x)", ok, owner, czxid, taken.Token, s.zid.Load())
	}
}

// proxiedClaim is a claim staged by a waiter whose backend reaches the
// server through a proxy: the pieces the claim give-back tests use.
type proxiedClaim struct {
	wb, direct *Backend // the waiter's backend (through p), and one dialled directly
	p          *proxy
	a          *admin
	w          simba.SessionID // the waiter's session
	s          *session        // and its state
}

// stageProxiedClaim makes a session of direct hold name and a waiter
// behind a proxy watch it, then releases it: the waiter's release watch
// stages its claim, which no Acquire takes. The admin connection is closed
// when t ends.
func stageProxiedClaim(t *testing.T, name string) proxiedClaim {
	t.Helper()
	var c proxiedClaim
	c.wb, c.direct, c.p = newProxiedBackend(t)
	c.a = dialAdmin(t, testServers(t, "SIMBA_TEST_ZK_SERVERS"))
	t.Cleanup(c.a.close)
	holder := mustOpen(t, c.direct, 10*time.Second)
	held := mustAcquire(t, c.direct, holder, name)
	c.w = mustOpen(t, c.wb, 10*time.Second)
	if r := mustAcquire(t, c.wb, c.w, name); r.Won {
		t.Fatal("the waiter won a held lease")
	}
	fired, err := c.wb.WatchRelease(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.direct.Release(ctx(t), holder, name, held.Token); err != nil {
		t.Fatal(err)
	}
	<-fired
	if c.s, err = c.wb.session(c.w); err != nil {
		t.Fatal(err)
	}
	unlock, err := c.s.lockName(ctx(t), name, true) // the claim was answered
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if ok, owner, _ := c.a.node(c.wb, name); !ok || owner != c.s.zid.Load() {
		t.Fatal("no staged claim: the waiter did not create the node")
	}
	return c
}

// awaitBack waits, 8 s at most, until the waiter's session answers a
// keep-alive again after the proxy was restored.
func (c proxiedClaim) awaitBack(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for {
		if _, err := c.wb.KeepAlive(ctx(t), c.w, simba.KeepAliveRequest{Lease: 10 * time.Second}); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("the waiter's session did not come back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
