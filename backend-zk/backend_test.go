package simbazk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

const lease = 2 * time.Second

func TestAcquireReleaseTokens(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	a, c := mustOpen(t, b, lease), mustOpen(t, b, lease)

	r1 := mustAcquire(t, b, a, "job")
	if !r1.Won || r1.Token == 0 {
		t.Fatalf("first Acquire = %+v, want won with a token > 0", r1)
	}
	if r := mustAcquire(t, b, c, "job"); r.Won || r.Token != 0 {
		t.Fatalf("Acquire by another session = %+v, want not won, token 0", r)
	}
	if got := owned(t, b, a, "job"); len(got) != 1 || got["job"] != r1.Token {
		t.Fatalf("KeepAlive owned = %v, want job:%d", got, r1.Token)
	}

	// The owner acquiring again starts a new term with a greater token.
	r2 := mustAcquire(t, b, a, "job")
	if !r2.Won || r2.Token <= r1.Token {
		t.Fatalf("owner's second Acquire = %+v, want won with a token > %d", r2, r1.Token)
	}
	// A release with the old token frees nothing.
	if err := b.Release(ctx(t), a, "job", r1.Token); err != nil {
		t.Fatalf("Release(stale): %v", err)
	}
	if r := mustAcquire(t, b, c, "job"); r.Won {
		t.Fatalf("Acquire after a stale release = %+v, want not won", r)
	}
	// A release by the other session frees nothing either.
	if err := b.Release(ctx(t), c, "job", r2.Token); err != nil {
		t.Fatalf("Release(other session): %v", err)
	}
	if got := owned(t, b, a, "job"); got["job"] != r2.Token {
		t.Fatalf("KeepAlive owned = %v, want job:%d", got, r2.Token)
	}
	if err := b.Release(ctx(t), a, "job", r2.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := owned(t, b, a, "job"); len(got) != 0 {
		t.Fatalf("KeepAlive owned after release = %v, want none", got)
	}
	r3 := mustAcquire(t, b, c, "job")
	if !r3.Won || r3.Token <= r2.Token {
		t.Fatalf("Acquire after release = %+v, want won with a token > %d", r3, r2.Token)
	}
}

func TestRoundTrips(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	s := mustOpen(t, b, 5*time.Second)
	warm := mustAcquire(t, b, s, "warm").Token // creates the parents
	// Watches "warm".
	mustKeepAlive(t, b, s, simba.KeepAliveRequest{Held: map[string]uint64{"warm": warm}, Generation: 1})

	count := func(what string, want int64, f func()) {
		t.Helper()
		before := requests(t, b, s)
		f()
		if got := requests(t, b, s) - before; got != want {
			t.Errorf("%s sent %d requests, want %d", what, got, want)
		}
	}
	var tok uint64
	count("Acquire", 1, func() { tok = mustAcquire(t, b, s, "rt").Token })
	held := simba.KeepAliveRequest{Held: map[string]uint64{"warm": warm, "rt": tok}, Generation: 2}
	count("KeepAlive after a win", 2, func() { mustKeepAlive(t, b, s, held) }) // renewal + a read of the new lease
	count("KeepAlive, nothing changed", 1, func() { mustKeepAlive(t, b, s, held) })
	count("Release", 1, func() {
		if err := b.Release(ctx(t), s, "rt", tok); err != nil {
			t.Fatal(err)
		}
	})
	count("Release of a term no longer held", 1, func() { // an exists
		if err := b.Release(ctx(t), s, "rt", tok); err != nil {
			t.Fatal(err)
		}
	})
	again := mustAcquire(t, b, s, "rt").Token
	count("Release of a term before the current one", 0, func() {
		if err := b.Release(ctx(t), s, "rt", tok); err != nil {
			t.Fatal(err)
		}
	})
	count("KeepAlive of an unsure name just won", 2, func() {
		if got := mustKeepAlive(t, b, s, simba.KeepAliveRequest{Unsure: []string{"rt"}}).Owned; got["rt"] != again {
			t.Errorf("KeepAlive owns %v, want rt:%d", got, again)
		}
	})
}

// TestReleaseAfterDataChangedByHand: a release whose one-request delete
// misses because the node's version moved (its data written by hand) still
// frees the node after checking that it is the session's own at the token.
func TestReleaseAfterDataChangedByHand(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	s := mustOpen(t, b, lease)
	r := mustAcquire(t, b, s, "edited")
	a := dialAdmin(t, servers)
	defer a.close()
	path := b.Root() + "/leases/edited"
	if _, err := a.conn.Set(path, []byte("by hand"), -1); err != nil {
		t.Fatalf("set by hand: %v", err)
	}
	before := requests(t, b, s)
	if err := b.Release(ctx(t), s, "edited", r.Token); err != nil {
		t.Fatal(err)
	}
	if got := requests(t, b, s) - before; got != 3 {
		t.Errorf("Release sent %d requests, want 3 (delete, exists, delete)", got)
	}
	if ok, _, err := a.conn.Exists(path); err != nil || ok {
		t.Fatalf("after Release the node exists = %v (%v), want gone", ok, err)
	}
}

func TestNamesNeedingCare(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	s := mustOpen(t, b, lease)
	for _, name := range []string{
		"...", "a..b", ".a", "a.", "..a", "a..", "-", "_", ":", "a:b", "zookeeper", "leases", "A-Z_0.9:x",
		strings.Repeat("x", simba.MaxNameLength), strings.Repeat(".", simba.MaxNameLength),
	} {
		r := mustAcquire(t, b, s, name)
		if !r.Won {
			t.Fatalf("Acquire(%q) not won", name)
		}
		if got := owned(t, b, s, name)[name]; got != r.Token {
			t.Fatalf("KeepAlive owns %q with token %d, want %d", name, got, r.Token)
		}
		if err := b.Release(ctx(t), s, name, r.Token); err != nil {
			t.Fatalf("Release(%q): %v", name, err)
		}
	}
	// Each name is exactly one node below Root/leases.
	a := dialAdmin(t, servers)
	defer a.close()
	r := mustAcquire(t, b, s, "a..b")
	ok, st, err := a.conn.Exists(b.Root() + "/leases/a..b")
	if err != nil || !ok || uint64(st.Czxid) != r.Token {
		t.Fatalf("node of %q: exists=%v stat=%+v err=%v, want czxid %d", "a..b", ok, st, err, r.Token)
	}

	for _, name := range []string{"", ".", "..", "a/b", "/", "a b", "é", "a\x00", strings.Repeat("x", simba.MaxNameLength+1)} {
		before := requests(t, b, s)
		_, err := b.Acquire(ctx(t), s, name)
		var ne *simba.NameError
		if !errors.As(err, &ne) || !errors.Is(err, simba.ErrInvalidName) {
			t.Errorf("Acquire(%q) = %v, want a *simba.NameError", name, err)
		}
		if err := b.Release(ctx(t), s, name, 1); !errors.Is(err, simba.ErrInvalidName) {
			t.Errorf("Release(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := b.JoinGroup(ctx(t), s, name); !errors.Is(err, simba.ErrInvalidName) {
			t.Errorf("JoinGroup(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := b.WatchRelease(ctx(t), name); !errors.Is(err, simba.ErrInvalidName) {
			t.Errorf("WatchRelease(%q) = %v, want ErrInvalidName", name, err)
		}
		if n := requests(t, b, s) - before; n != 0 {
			t.Errorf("invalid name %q sent %d requests, want none", name, n)
		}
	}
}

// TestLeaseStateBounded: a name used once leaves no node once released,
// and the next term of a name is above every token it had: the tokens are
// zxids, which grow across the whole ensemble, so no floor needs keeping.
func TestLeaseStateBounded(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	s := mustOpen(t, b, lease)
	var last uint64
	for i := range 100 {
		r := mustAcquire(t, b, s, fmt.Sprintf("once-%d", i))
		if !r.Won || r.Token <= last {
			t.Fatalf("Acquire once-%d = %+v, want won above %d", i, r, last)
		}
		last = r.Token
		if err := b.Release(ctx(t), s, fmt.Sprintf("once-%d", i), r.Token); err != nil {
			t.Fatal(err)
		}
	}
	a := dialAdmin(t, servers)
	defer a.close()
	if left, _, err := a.conn.Children(b.Root() + "/leases"); err != nil || len(left) != 0 {
		t.Fatalf("nodes left under leases after 100 names used once: %v (%v), want none", left, err)
	}
	if r := mustAcquire(t, b, s, "once-0"); !r.Won || r.Token <= last {
		t.Fatalf("Acquire of a name used before = %+v, want won above %d", r, last)
	}
}

// TestKeepAliveCostFlat: a keep-alive of a session that holds 1 or 1,000
// leases is one request while other sessions take and free other leases
// beside it (every child change of Root/leases).
func TestKeepAliveCostFlat(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	o := secondNode(t, b, servers)
	other := mustOpen(t, o, 30*time.Second) // never kept alive: outlives the test on a slow machine
	churn := func() {
		t.Helper()
		r := mustAcquire(t, o, other, "churn")
		if err := o.Release(ctx(t), other, "churn", r.Token); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{1, 1000} {
		s := mustOpen(t, b, 10*time.Second)
		ss, err := b.session(s)
		if err != nil {
			t.Fatal(err)
		}
		req := simba.KeepAliveRequest{Held: acquireMany(t, b, ss, n), Generation: 1}
		if lost := mustKeepAlive(t, b, s, req).Lost; len(lost) != 0 { // reads each new lease once
			t.Fatalf("keep-alive lost %v, want none", lost)
		}
		const rounds = 5
		before := requests(t, b, s)
		for range rounds {
			churn()
			if lost := mustKeepAlive(t, b, s, req).Lost; len(lost) != 0 {
				t.Fatalf("keep-alive lost %v, want none", lost)
			}
		}
		if per := float64(requests(t, b, s)-before) / rounds; per != 1 {
			t.Errorf("%d leases: %.1f requests per keep-alive while other leases change, want 1", n, per)
		}
		if err := b.CloseSession(ctx(t), s); err != nil { // frees the names for the next n
			t.Fatal(err)
		}
	}
}

func TestLeaseDeletedByHand(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	s := mustOpen(t, b, lease)
	r := mustAcquire(t, b, s, "gone")
	keep := mustAcquire(t, b, s, "kept")
	req := simba.KeepAliveRequest{Held: map[string]uint64{"gone": r.Token, "kept": keep.Token}, Generation: 1}
	mustKeepAlive(t, b, s, req) // reads both once and watches them

	a := dialAdmin(t, servers)
	defer a.close()
	if err := a.conn.Delete(b.Root()+"/leases/gone", -1); err != nil {
		t.Fatalf("delete by hand: %v", err)
	}
	if got := mustKeepAlive(t, b, s, req).Lost; len(got) != 1 || got[0] != "gone" {
		t.Fatalf("KeepAlive lost %v, want only gone (deleted by hand)", got)
	}

	// Deleted and taken by another session: still not listed.
	c := mustOpen(t, b, lease)
	if err := a.conn.Delete(b.Root()+"/leases/kept", -1); err != nil {
		t.Fatalf("delete by hand: %v", err)
	}
	if rc := mustAcquire(t, b, c, "kept"); !rc.Won || rc.Token <= keep.Token {
		t.Fatalf("Acquire by other session = %+v, want won with a token > %d", rc, keep.Token)
	}
	req = simba.KeepAliveRequest{Held: map[string]uint64{"kept": keep.Token}, Generation: 2}
	if got := mustKeepAlive(t, b, s, req).Lost; len(got) != 1 || got[0] != "kept" {
		t.Fatalf("KeepAlive lost %v, want kept (deleted by hand and taken)", got)
	}
}

func TestCloseSessionFreesAtOnce(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	a, c := mustOpen(t, b, 10*time.Second), mustOpen(t, b, lease)
	mustAcquire(t, b, a, "x")
	if n, err := b.JoinGroup(ctx(t), a, "g"); err != nil || n != 1 {
		t.Fatalf("JoinGroup = %d, %v; want 1", n, err)
	}
	if err := b.CloseSession(ctx(t), a); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	if r := mustAcquire(t, b, c, "x"); !r.Won {
		t.Fatal("lease of a closed session not free at once")
	}
	if n, err := b.JoinGroup(ctx(t), c, "g"); err != nil || n != 1 {
		t.Fatalf("JoinGroup after the other member closed = %d, %v; want 1", n, err)
	}
	if _, err := b.KeepAlive(ctx(t), a, simba.KeepAliveRequest{Lease: lease}); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("KeepAlive of a closed session = %v, want ErrSessionExpired", err)
	}
	if err := b.CloseSession(ctx(t), a); err != nil {
		t.Fatalf("second CloseSession = %v, want nil", err)
	}
	if err := b.CloseSession(ctx(t), "unknown"); err != nil {
		t.Fatalf("CloseSession(unknown) = %v, want nil", err)
	}
}

func TestGroups(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	a, c := mustOpen(t, b, lease), mustOpen(t, b, lease)
	join := func(s simba.SessionID, want int) {
		t.Helper()
		if n, err := b.JoinGroup(ctx(t), s, "grp"); err != nil || n != want {
			t.Fatalf("JoinGroup = %d, %v; want %d", n, err, want)
		}
	}
	join(a, 1)
	join(a, 1) // joining twice is joining once
	join(c, 2)
	if got := mustKeepAlive(t, b, a).Groups; len(got) != 1 || got["grp"] != 2 {
		t.Fatalf("KeepAlive groups = %v, want grp:2", got)
	}
	if err := b.LeaveGroup(ctx(t), c, "grp"); err != nil {
		t.Fatal(err)
	}
	if err := b.LeaveGroup(ctx(t), c, "grp"); err != nil {
		t.Fatalf("leaving twice: %v", err)
	}
	if got := mustKeepAlive(t, b, a).Groups; got["grp"] != 1 {
		t.Fatalf("KeepAlive groups = %v, want grp:1", got)
	}
	if got := mustKeepAlive(t, b, c).Groups; len(got) != 0 {
		t.Fatalf("KeepAlive groups of a session that left = %v, want none", got)
	}
}

func TestWatchRelease(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	a := mustOpen(t, b, 10*time.Second)

	free, err := b.WatchRelease(ctx(t), "w")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-free:
	default:
		t.Fatal("watch on a free lease not fired at once")
	}

	r := mustAcquire(t, b, a, "w")
	w1, err := b.WatchRelease(ctx(t), "w")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := b.WatchRelease(ctx(t), "w")
	if err != nil {
		t.Fatal(err)
	}
	if w1 != w2 {
		t.Error("two watches of one name do not share their channel")
	}
	select {
	case <-w1:
		t.Fatal("watch fired while the lease is held")
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	if err := b.Release(ctx(t), a, "w", r.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w1:
		t.Logf("release seen %v after Release was called", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("watch not fired by the release")
	}

	// The owner's session ending fires it too.
	mustAcquire(t, b, a, "w")
	w3, err := b.WatchRelease(ctx(t), "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CloseSession(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w3:
	case <-time.After(5 * time.Second):
		t.Fatal("watch not fired by the owner's session closing")
	}

	// A pending watch is fired by Close and its goroutine ends (goleak).
	c := mustOpen(t, b, 10*time.Second)
	mustAcquire(t, b, c, "held")
	w4, err := b.WatchRelease(ctx(t), "held")
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	select {
	case <-w4:
	default:
		t.Fatal("pending watch not fired by Close")
	}
}

// TestWatchKeepsOnlyWaitingCallers: callers that come and go while a lease
// stays held leave nothing behind in the shared watch.
func TestWatchKeepsOnlyWaitingCallers(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	holder := mustOpen(t, b, 10*time.Second)
	const name = "held-long"
	mustAcquire(t, b, holder, name)
	keep, stop := context.WithCancel(ctx(t))
	defer stop()
	if _, err := b.WatchRelease(keep, name); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		c, cancel := context.WithCancel(ctx(t))
		if _, err := b.WatchRelease(c, name); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		w := b.watches[name]
		callers := len(w.stops)
		b.mu.Unlock()
		if callers == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch keeps the stop functions of %d callers, want 1", callers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAuthACL(t *testing.T) {
	b, servers := newTestBackend(t, Options{Auth: testAuth})
	s := mustOpen(t, b, lease)
	r := mustAcquire(t, b, s, "secured")
	if _, err := b.JoinGroup(ctx(t), s, "g"); err != nil {
		t.Fatal(err)
	}

	a := dialAdmin(t, servers) // no credentials
	defer a.close()
	path := b.Root() + "/leases/secured"
	ok, st, err := a.conn.Exists(path)
	if err != nil || !ok || uint64(st.Czxid) != r.Token {
		t.Fatalf("anonymous read: exists=%v err=%v, want the node readable", ok, err)
	}
	if err := a.conn.Delete(path, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("anonymous delete = %v, want zk.ErrNoAuth", err)
	}
	if _, err := a.conn.Create(b.Root()+"/leases/intruder", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("anonymous create = %v, want zk.ErrNoAuth", err)
	}
	if err := a.conn.AddAuth("digest", []byte(testAuth)); err != nil {
		t.Fatal(err)
	}
	if err := a.conn.Delete(path, -1); err != nil {
		t.Fatalf("delete with the identity: %v", err)
	}
	// Also: the watch connection authenticates.
	if _, err := b.WatchRelease(ctx(t), "secured"); err != nil {
		t.Fatal(err)
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		give    Options
		wantErr string // "" for valid
	}{
		{give: Options{}},
		{give: Options{Root: "/a/b-c/simba"}},
		{give: Options{Root: "/a..b"}},
		{give: Options{Root: "simba"}, wantErr: "must start with /"},
		{give: Options{Root: "/"}, wantErr: "below"},
		{give: Options{Root: "/simba/"}, wantErr: "end with /"},
		{give: Options{Root: "/a//b"}, wantErr: "empty path component"},
		{give: Options{Root: "/a/./b"}, wantErr: `"."`},
		{give: Options{Root: "/a/.."}, wantErr: `".."`},
		{give: Options{Root: "/zookeeper/x"}, wantErr: "reserved"},
		{give: Options{Root: "/a\x01"}, wantErr: "not allowed"},
		{give: Options{Auth: "user"}, wantErr: "user:password"},
		{give: Options{Auth: ":pw"}, wantErr: "user:password"},
		{give: Options{Auth: "user:"}, wantErr: "user:password"},
		{give: Options{DialTimeout: -time.Second}, wantErr: "negative"},
		{give: Options{ACL: []zk.ACL{}}, wantErr: "empty"},
	}
	for _, tt := range tests {
		_, err := New([]string{"127.0.0.1:2181"}, tt.give)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("New(%v) = %v, want nil", tt.give, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidOptions)):
			t.Errorf("New(%v) = %v, want ErrInvalidOptions containing %q", tt.give, err, tt.wantErr)
		}
	}
	if _, err := New(nil, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New(no servers) = %v, want ErrInvalidOptions", err)
	}
}

func TestOptionsNeverShowPassword(t *testing.T) {
	o := Options{Auth: "simba:hunter2"}
	_, err := New([]string{"h:1"}, Options{Auth: "simba:hunter2", Root: "bad"})
	for _, s := range []string{o.String(), o.GoString(), o.LogValue().String(), err.Error()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%q shows the password", s)
		}
	}
	if !strings.Contains(o.String(), "simba:redacted") {
		t.Errorf("String() = %q, want the user and a redacted password", o.String())
	}
	// An identity without its ':' (refused by New) may be all password.
	bad := Options{Auth: "hunter2"}
	for _, s := range []string{bad.String(), bad.LogValue().String()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%q shows an Auth without ':'", s)
		}
	}
}

func TestParseConnectString(t *testing.T) {
	tests := []struct {
		give        string
		wantServers string
		wantChroot  string
		wantErr     bool
	}{
		{give: "a:1", wantServers: "a:1"},
		{give: "a:1, b:2,", wantServers: "a:1,b:2"},
		{give: "a:1,b:2/app/x", wantServers: "a:1,b:2", wantChroot: "/app/x"},
		{give: "a:1/", wantServers: "a:1"},
		{give: "", wantErr: true},
		{give: "/app", wantErr: true},
		{give: "a:1/app/", wantErr: true},
	}
	for _, tt := range tests {
		servers, chroot, err := ParseConnectString(tt.give)
		if tt.wantErr {
			if !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("ParseConnectString(%q) = %v, want ErrInvalidOptions", tt.give, err)
			}
			continue
		}
		if err != nil || strings.Join(servers, ",") != tt.wantServers || chroot != tt.wantChroot {
			t.Errorf("ParseConnectString(%q) = %v, %q, %v; want %s, %q", tt.give, servers, chroot, err, tt.wantServers, tt.wantChroot)
		}
	}
}

// A digest identity written into a connect string, as in a URL, is
// refused without quoting it: the error would show the password.
func TestParseConnectStringQuotesNoUserInformation(t *testing.T) {
	for _, give := range []string{"simba:Zq7SecretPW@127.0.0.1:2181", "a:1,simba:Zq7SecretPW@b:2/app", "simba:Zq7SecretPW@"} {
		_, _, err := ParseConnectString(give)
		if !errors.Is(err, ErrInvalidOptions) || strings.Contains(err.Error(), "Zq7SecretPW") {
			t.Errorf("ParseConnectString(%q) = %v, want an options error without the password", give, err)
		}
	}
}

func TestOpenChroot(t *testing.T) {
	servers := testServers(t, "SIMBA_TEST_ZK_SERVERS")
	b, err := Open(ctx(t), strings.Join(servers, ",")+"/app", Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Root() != "/app/simba" {
		t.Fatalf("Open with a chroot: root %q, want /app/simba", b.Root())
	}
}

// TestOpenChrootRefusesBadRoot: a chroot does not make a Root valid that
// New refuses; "simba" after the chroot /app would otherwise be the node
// /appsimba.
func TestOpenChrootRefusesBadRoot(t *testing.T) {
	for _, root := range []string{"simba", "simba/", "x/.."} {
		b, err := Open(context.Background(), "127.0.0.1:1/app", Options{Root: root, Logger: quiet()})
		if err == nil {
			_ = b.Close()
		}
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Root") {
			t.Errorf("Open with chroot /app and Root %q = %v, want an *OptionsError about Root", root, err)
		}
	}
}
