package simbazk

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// newReader returns a second backend on the same root as b, which opens no
// session: it asks who holds the leases of b's sessions.
func newReader(t *testing.T, b *Backend, servers []string) *Backend {
	t.Helper()
	r, err := New(servers, Options{Root: b.Root(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func mustOpenAs(t testing.TB, b *Backend, lease time.Duration, identity string) simba.SessionID {
	t.Helper()
	g, err := b.OpenSessionAs(ctx(t), lease, identity)
	if err != nil {
		t.Fatalf("OpenSessionAs(%v, %q): %v", lease, identity, err)
	}
	return g.ID
}

func mustHolder(t testing.TB, b *Backend, name string) (simba.Holder, bool) {
	t.Helper()
	h, ok, err := b.Holder(ctx(t), name)
	if err != nil {
		t.Fatalf("Holder(%q): %v", name, err)
	}
	return h, ok
}

func wantNobody(t testing.TB, b *Backend, name, why string) {
	t.Helper()
	if h, ok := mustHolder(t, b, name); ok {
		t.Fatalf("Holder(%q) = %+v, want nobody: %s", name, h, why)
	}
}

func wantHolder(t testing.TB, b *Backend, name string, want simba.Holder) simba.Holder {
	t.Helper()
	h, ok := mustHolder(t, b, name)
	switch {
	case !ok:
		t.Fatalf("Holder(%q) = nobody, want %+v", name, want)
	case h.Session != want.Session || h.Token != want.Token || h.Identity != want.Identity:
		t.Fatalf("Holder(%q) = %+v, want session %s, token %d, identity %q", name, h, want.Session, want.Token, want.Identity)
	case time.Since(h.Since) > 10*time.Second || time.Until(h.Since) > time.Second:
		t.Fatalf("Holder(%q) since %v, want about now (%v)", name, h.Since, time.Now())
	}
	return h
}

// TestHolder follows one name through its terms, read by a backend with no
// session: the owner's session and identity as opened, the token of each
// term, and nobody once released or the owner's session closed. The node's
// data is the identity (the data layout of the README).
func TestHolder(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	r := newReader(t, b, servers)
	const identity = "worker-1 (zone é) pid:42"

	wantNobody(t, r, "job", "never taken")
	s := mustOpenAs(t, b, lease, identity)
	first := mustAcquire(t, b, s, "job")
	h1 := wantHolder(t, r, "job", simba.Holder{Session: s, Identity: identity, Token: first.Token})

	a := dialAdmin(t, servers)
	defer a.close()
	data, st, err := a.conn.Get(b.Root() + "/leases/job")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != identity || sessionID(st.EphemeralOwner) != s || uint64(st.Czxid) != first.Token {
		t.Fatalf("lease node: data %q, owner %s, czxid %d; want %q, %s, %d", data, sessionID(st.EphemeralOwner), st.Czxid, identity, s, first.Token)
	}

	again := mustAcquire(t, b, s, "job") // a new term, a new node
	if !again.Won || again.Token <= first.Token {
		t.Fatalf("re-acquire = %+v, want won above %d", again, first.Token)
	}
	h2 := wantHolder(t, r, "job", simba.Holder{Session: s, Identity: identity, Token: again.Token})
	if h2.Since.Before(h1.Since) {
		t.Errorf("the new term began at %v, before the first one (%v)", h2.Since, h1.Since)
	}

	// The owner's backend answers the same, without a request on the
	// session (which would renew it).
	before := requests(t, b, s)
	wantHolder(t, b, "job", simba.Holder{Session: s, Identity: identity, Token: again.Token})
	if n := requests(t, b, s) - before; n != 0 {
		t.Errorf("Holder sent %d requests on the session, want none", n)
	}

	if err := b.Release(ctx(t), s, "job", again.Token); err != nil {
		t.Fatal(err)
	}
	wantNobody(t, r, "job", "released")

	// A session opened without an identity holds with an empty one.
	plain := mustOpen(t, b, lease)
	won := mustAcquire(t, b, plain, "job")
	wantHolder(t, r, "job", simba.Holder{Session: plain, Token: won.Token})
	if err := b.CloseSession(ctx(t), plain); err != nil {
		t.Fatal(err)
	}
	wantNobody(t, r, "job", "its owner's session was closed")

	// Every session of a closed backend ends.
	won = mustAcquire(t, b, s, "job")
	wantHolder(t, r, "job", simba.Holder{Session: s, Identity: identity, Token: won.Token})
	_ = b.Close()
	wantNobody(t, r, "job", "its owner's backend was closed")

	var nameErr *simba.NameError
	if _, _, err := r.Holder(ctx(t), "bad/name"); !errors.As(err, &nameErr) || !errors.Is(err, simba.ErrInvalidName) {
		t.Errorf("Holder(\"bad/name\") = %v, want a *simba.NameError", err)
	}
}

// TestHolderAfterExpiry: the server deletes the node of a session that is
// no longer kept alive; nobody holds the lease then.
func TestHolderAfterExpiry(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	r := newReader(t, b, servers)
	s := mustOpenAs(t, b, lease, "short-lived")
	won := mustAcquire(t, b, s, "x")
	wantHolder(t, r, "x", simba.Holder{Session: s, Identity: "short-lived", Token: won.Token})
	deadline := time.Now().Add(4 * lease)
	for {
		if _, ok := mustHolder(t, r, "x"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a session with a %v lease still holds x after %v without keep-alive", lease, 4*lease)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := b.KeepAlive(ctx(t), s, simba.KeepAliveRequest{Lease: lease}); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("KeepAlive after the node went = %v, want ErrSessionExpired", err)
	}
}

func TestOpenSessionAsIdentity(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	for _, bad := range []string{strings.Repeat("a", simba.MaxIdentity+1), "tab\there", "nul\x00", "\xff\xfe"} {
		if _, err := b.OpenSessionAs(ctx(t), lease, bad); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("OpenSessionAs(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	b.mu.Lock()
	n := len(b.conns)
	b.mu.Unlock()
	if n != 0 {
		t.Errorf("%d connections after refused identities, want none", n)
	}

	r := newReader(t, b, servers)
	longest := strings.Repeat("é", simba.MaxIdentity/2) // 256 bytes
	s := mustOpenAs(t, b, lease, longest)
	won := mustAcquire(t, b, s, "long")
	wantHolder(t, r, "long", simba.Holder{Session: s, Identity: longest, Token: won.Token})

	empty := mustOpenAs(t, b, lease, "") // as OpenSession
	won = mustAcquire(t, b, empty, "empty")
	wantHolder(t, r, "empty", simba.Holder{Session: empty, Token: won.Token})
}

// TestHolderNodeByHand: a persistent node created by hand blocks the name;
// it is reported held by no real session, its data (not an identity) left
// out.
func TestHolderNodeByHand(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	s := mustOpen(t, b, lease)
	mustAcquire(t, b, s, "warm") // creates Root/leases
	a := dialAdmin(t, servers)
	defer a.close()
	path := b.Root() + "/leases/manual"
	if _, err := a.conn.Create(path, []byte("bin\x00ary"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, err := a.conn.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	wantHolder(t, b, "manual", simba.Holder{Session: "0000000000000000", Token: uint64(st.Czxid)})
	if r := mustAcquire(t, b, s, "manual"); r.Won {
		t.Fatal("acquired a name blocked by a node made by hand")
	}
}

func TestSessionIDFormat(t *testing.T) {
	for zid, want := range map[int64]simba.SessionID{
		0x1000012345abcd:  "001000012345abcd",
		-1:                "ffffffffffffffff",
		math.MinInt64 + 5: "8000000000000005",
	} {
		if got := sessionID(zid); got != want {
			t.Errorf("sessionID(%d) = %s, want %s", zid, got, want)
		}
	}
}
