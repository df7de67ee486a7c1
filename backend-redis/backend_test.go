package simbaredis

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

func TestKeyPrefixValidation(t *testing.T) {
	tests := []struct {
		give    string
		wantErr string // empty: valid
	}{
		{give: ""}, // default
		{give: "simba:"},
		{give: "app1/simba:"},
		{give: "{simba}:"},
		{give: "x{tag}y"},
		{give: strings.Repeat("p", MaxKeyPrefixLength)},
		{give: strings.Repeat("p", MaxKeyPrefixLength+1), wantErr: "at most 64"},
		{give: "has space", wantErr: "printable ASCII"},
		{give: "tab\t", wantErr: "printable ASCII"},
		{give: "nl\n", wantErr: "printable ASCII"},
		{give: "é:", wantErr: "printable ASCII"},
		{give: "{simba:", wantErr: "hash tag"},
		{give: "simba}:", wantErr: "hash tag"},
		{give: "{}simba:", wantErr: "hash tag"},
	}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer client.Close()
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			b, err := New(client, Options{KeyPrefix: tt.give, Logger: quiet})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New(KeyPrefix %q): %v", tt.give, err)
				}
				defer b.Close()
				want := tt.give
				if want == "" {
					want = DefaultKeyPrefix
				}
				if got := b.KeyPrefix(); got != want {
					t.Errorf("KeyPrefix() = %q, want %q", got, want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New(KeyPrefix %q) = %v, want ErrInvalidOptions saying %q", tt.give, err, tt.wantErr)
			}
		})
	}
}

func TestNewRefusesUnusableClients(t *testing.T) {
	var typedNil *redis.Client
	for _, c := range []redis.UniversalClient{nil, typedNil} {
		if _, err := New(c, Options{}); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%#v) = %v, want ErrInvalidOptions", c, err)
		}
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for name, c := range map[string]redis.UniversalClient{"cluster": cluster, "ring": ring} {
		if _, err := New(c, Options{}); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "hash tag") {
			t.Errorf("New(%s client, default prefix) = %v, want ErrInvalidOptions about a hash tag", name, err)
		}
		b, err := New(c, Options{KeyPrefix: "{simba}:", Logger: quiet})
		if err != nil {
			t.Errorf("New(%s client, prefix {simba}:) = %v", name, err)
			continue
		}
		_ = b.Close()
	}
}

func TestNewWarnsWithoutContextTimeouts(t *testing.T) {
	var got []Warning
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	b, err := New(client, Options{Logger: quiet, OnWarning: func(w Warning) { got = append(got, w) }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(got) != 1 || got[0].Code != WarnContextTimeouts {
		t.Fatalf("warnings passed to OnWarning = %+v, want one %s", got, WarnContextTimeouts)
	}
	if w := b.Warnings(); len(w) != 1 || w[0] != got[0] {
		t.Fatalf("Warnings() = %+v, want %+v", w, got)
	}

	ok := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer ok.Close()
	b2, err := New(ok, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if w := b2.Warnings(); len(w) != 0 {
		t.Fatalf("Warnings() with ContextTimeoutEnabled = %+v, want none", w)
	}
}

func TestOpenURLErrorsHideThePassword(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, u := range []string{
		"redis://user:" + secret + "@127.0.0.1:notaport/0",
		"redis://user:" + secret + "@127.0.0.1:6379/0/extra",
		"redis://user:" + secret + "@127.0.0.1:6379/0?no_such_option=1",
		"http://user:" + secret + "@127.0.0.1:6379/0",
		"redis://user:" + secret + "@[::1/0",
	} {
		_, err := Open(context.Background(), u, Options{})
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOptions", strings.ReplaceAll(u, secret, "***"), err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error of an invalid URL shows the password: %v", err)
		}
	}
}

func TestInvalidInputNeverReachesTheServer(t *testing.T) {
	// The client points at a port nobody listens on: any call that got
	// through would fail with a dial error instead of the expected one.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	b, err := New(client, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := callCtx(t)
	good := simba.SessionID(strings.Repeat("ab", 16))
	var nameErr *simba.NameError
	for _, name := range []string{"", "a b", "..", strings.Repeat("x", 129), "a{b}"} {
		if _, err := b.Acquire(ctx, good, name); !errors.As(err, &nameErr) {
			t.Errorf("Acquire(%q) = %v, want a *simba.NameError", name, err)
		}
		if err := b.Release(ctx, good, name, 1); !errors.As(err, &nameErr) {
			t.Errorf("Release(%q) = %v, want a *simba.NameError", name, err)
		}
		if _, err := b.JoinGroup(ctx, good, name); !errors.As(err, &nameErr) {
			t.Errorf("JoinGroup(%q) = %v, want a *simba.NameError", name, err)
		}
		if err := b.LeaveGroup(ctx, good, name); !errors.As(err, &nameErr) {
			t.Errorf("LeaveGroup(%q) = %v, want a *simba.NameError", name, err)
		}
		if _, err := b.WatchRelease(ctx, name); !errors.As(err, &nameErr) {
			t.Errorf("WatchRelease(%q) = %v, want a *simba.NameError", name, err)
		}
		if _, _, err := b.Holder(ctx, name); !errors.As(err, &nameErr) {
			t.Errorf("Holder(%q) = %v, want a *simba.NameError", name, err)
		}
	}
	for _, lease := range []time.Duration{0, -time.Second, 999 * time.Microsecond} {
		if _, err := b.OpenSession(ctx, lease); err == nil || !strings.Contains(err.Error(), "at least 1ms") {
			t.Errorf("OpenSession(lease %v) = %v, want an error about the minimum", lease, err)
		}
		if _, err := b.KeepAlive(ctx, good, renewal(lease)); err == nil || !strings.Contains(err.Error(), "at least 1ms") {
			t.Errorf("KeepAlive(lease %v) = %v, want an error about the minimum", lease, err)
		}
	}
	// Ids this package cannot have issued name no session.
	for _, sid := range []simba.SessionID{"", "nope", simba.SessionID(strings.Repeat("AB", 16)), "../" + good} {
		if _, err := b.KeepAlive(ctx, sid, renewal(time.Second)); !errors.Is(err, simba.ErrSessionExpired) {
			t.Errorf("KeepAlive(%q) = %v, want ErrSessionExpired", sid, err)
		}
		if _, err := b.Acquire(ctx, sid, "n"); !errors.Is(err, simba.ErrSessionExpired) {
			t.Errorf("Acquire(%q) = %v, want ErrSessionExpired", sid, err)
		}
		if _, err := b.JoinGroup(ctx, sid, "g"); !errors.Is(err, simba.ErrSessionExpired) {
			t.Errorf("JoinGroup(%q) = %v, want ErrSessionExpired", sid, err)
		}
		for op, err := range map[string]error{
			"Release":      b.Release(ctx, sid, "n", 1),
			"LeaveGroup":   b.LeaveGroup(ctx, sid, "g"),
			"CloseSession": b.CloseSession(ctx, sid),
		} {
			if err != nil {
				t.Errorf("%s(%q) = %v, want a no-op", op, sid, err)
			}
		}
	}
}

// TestClosedBackend: closing a Backend made by New leaves the caller's
// client working (the conformance suite checks the rest of Close).
func TestClosedBackend(t *testing.T) {
	copts, err := redis.ParseURL(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	copts.ContextTimeoutEnabled = true
	user := redis.NewClient(copts)
	defer user.Close()
	b, err := New(user, Options{KeyPrefix: testPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := user.Ping(callCtx(t)).Err(); err != nil {
		t.Fatalf("Close closed the caller's client: %v", err)
	}
}

// TestLayout checks the keys of the default prefix against the layout the
// README documents.
func TestLayout(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	b := openBackend(t, url, Options{KeyPrefix: DefaultKeyPrefix})
	ctx := callCtx(t)
	name, group := "layout-"+testPrefix()[1:17], "layout-g-"+testPrefix()[1:17]
	t.Cleanup(func() { raw.Del(context.Background(), "simba:lease:"+name, "simba:group:"+group) })

	before, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	g, err := b.OpenSessionAs(ctx, 3*time.Second, "layout-node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.CloseSession(context.Background(), g.ID) })
	if !backendkit.ValidSessionID(string(g.ID)) {
		t.Fatalf("session id %q: want 32 lower-case hex digits", g.ID)
	}
	if g.Remaining <= 2900*time.Millisecond || g.Remaining > 3*time.Second {
		t.Fatalf("granted %v for a 3s lease", g.Remaining)
	}
	tok := mustWin(t, b, g.ID, name).Token
	if tok < uint64(before.UnixMicro()) || tok > uint64(raw.Time(ctx).Val().UnixMicro()) {
		t.Errorf("first token %d, want the server time in µs (ADR 0020), after %d", tok, before.UnixMicro())
	}
	token := strconv.FormatUint(tok, 10)
	if _, err := b.JoinGroup(ctx, g.ID, group); err != nil {
		t.Fatal(err)
	}
	sid := string(g.ID)
	wantTTL := func(key string, lo, hi time.Duration) {
		t.Helper()
		ttl, err := raw.PTTL(ctx, key).Result()
		if err != nil || ttl < lo || ttl > hi {
			t.Errorf("PTTL %s = %v, %v; want in [%v, %v]", key, ttl, err, lo, hi)
		}
	}
	wantHash := func(key string, want map[string]string) {
		t.Helper()
		got, err := raw.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatalf("HGETALL %s: %v", key, err)
		}
		for f, v := range want {
			if got[f] != v {
				t.Errorf("%s field %s = %q, want %q (hash %v)", key, f, got[f], v, got)
			}
		}
	}
	wantTimeField := func(key, field string) {
		t.Helper()
		v, err := raw.HGet(ctx, key, field).Result()
		if err != nil {
			t.Fatalf("HGET %s %s: %v", key, field, err)
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		now := raw.Time(ctx).Val()
		if err != nil || ms < before.UnixMilli() || ms > now.UnixMilli() {
			t.Errorf("%s field %s = %q, want the server time in ms, in [%d, %d]", key, field, v, before.UnixMilli(), now.UnixMilli())
		}
	}
	wantHash("simba:session:"+sid, map[string]string{"identity": "layout-node"})
	wantTimeField("simba:session:"+sid, "opened")
	leaseKey := "simba:lease:" + name
	wantHash(leaseKey, map[string]string{"session": sid, "token": token})
	wantTimeField(leaseKey, "since")
	wantTTL(leaseKey, -1, -1) // never expires
	// Nobody waits for the lease: the session hash does not name it.
	wantHash("simba:session:"+sid, map[string]string{"+" + name: ""})
	if ok, err := raw.SIsMember(ctx, "simba:joined:"+sid, group).Result(); err != nil || !ok {
		t.Errorf("SISMEMBER simba:joined:%s %s = %v, %v", sid, group, ok, err)
	}
	score, err := raw.ZScore(ctx, "simba:group:"+group, sid).Result()
	if err != nil {
		t.Fatalf("ZSCORE: %v", err)
	}
	now, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Duration(score)*time.Millisecond - time.Duration(now.UnixNano()); left <= 2*time.Second || left > 3*time.Second {
		t.Errorf("group member score is %v after server time, want the session expiry (3s lease)", left)
	}
	for _, key := range []string{"simba:session:" + sid, "simba:joined:" + sid, "simba:group:" + group} {
		wantTTL(key, 2*time.Second, 3*time.Second)
	}

	if err := b.Release(ctx, g.ID, name, tok); err != nil {
		t.Fatal(err)
	}
	got, err := raw.HGetAll(ctx, leaseKey).Result()
	if err != nil || got["session"] != "" || got["token"] != token || len(got) != 2 || got["since"] == "" {
		t.Errorf("lease hash after release = %v, %v; want token %s and since left", got, err, token)
	}
	if err := b.CloseSession(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := raw.Exists(ctx, "simba:session:"+sid, "simba:joined:"+sid).Result(); err != nil || n != 0 {
		t.Errorf("%d session keys left after CloseSession (%v), want 0", n, err)
	}
	if n, err := raw.Exists(ctx, "simba:group:"+group).Result(); err != nil || n != 0 {
		t.Errorf("group key left with its only member gone: %d, %v", n, err)
	}
}

// commandCounter counts the commands a client sends.
type commandCounter struct {
	mu    sync.Mutex
	names []string
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.names = append(c.names, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline as one entry, "pipeline(a b ...)".
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, cmd := range cmds {
			names[i] = cmd.Name()
		}
		c.mu.Lock()
		c.names = append(c.names, "pipeline("+strings.Join(names, " ")+")")
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns the commands sent since the last call.
func (c *commandCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = nil
	return n
}

// TestOneRoundTripPerCall pins the cost of every operation: one EVALSHA,
// plus one pipeline of CONFIG GET and INFO at the first OpenSession of a
// Backend.
func TestOneRoundTripPerCall(t *testing.T) {
	url := serverURL(t)
	b := openBackend(t, url, Options{})
	counter := &commandCounter{}
	b.client.AddHook(counter)
	ctx := callCtx(t)

	// Load the scripts once, as any earlier use of the server would.
	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.DeleteFunc(counter.take(), func(c string) bool { return c == "hello" }) // a new connection's
	if len(got) < 2 || got[0] != "pipeline(config info)" {
		t.Fatalf("first OpenSession sent %v, want CONFIG GET and INFO in one pipeline, then the script", got)
	}
	want := []string{"evalsha"}
	check := func(op string) {
		t.Helper()
		if got := counter.take(); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s sent %v, want %v", op, got, want)
		}
	}
	g2, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	check("OpenSession")
	_ = b.CloseSession(ctx, g2.ID)
	counter.take()
	g3, err := b.OpenSessionAs(ctx, 5*time.Second, "me")
	if err != nil {
		t.Fatal(err)
	}
	check("OpenSessionAs")
	_ = b.CloseSession(ctx, g3.ID)
	counter.take()
	var last simba.AcquireResult
	for _, name := range []string{"a", "b", "c"} { // warm every script
		last = mustWin(t, b, g.ID, name)
		if _, err := b.JoinGroup(ctx, g.ID, name); err != nil {
			t.Fatal(err)
		}
	}
	_ = b.LeaveGroup(ctx, g.ID, "c")
	_ = b.Release(ctx, g.ID, "c", last.Token)
	_, _, _ = b.Holder(ctx, "c")
	if _, err := b.KeepAlive(ctx, g.ID, renewal(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	counter.take()

	r := mustWin(t, b, g.ID, "d")
	check("Acquire")
	if _, ok, err := b.Holder(ctx, "d"); err != nil || !ok {
		t.Fatalf("Holder = %v, %v; want held", ok, err)
	}
	check("Holder")
	held := map[string]uint64{"a": 0, "b": 0, "d": r.Token}
	for _, name := range []string{"a", "b"} {
		h, _, _ := b.Holder(ctx, name)
		held[name] = h.Token
	}
	counter.take()
	reply, err := b.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: 5 * time.Second, Held: held, Unsure: []string{"c"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Lost) != 0 || len(reply.Owned) != 0 || len(reply.Groups) != 2 {
		t.Fatalf("KeepAlive = %+v, want nothing lost or owned and 2 groups", reply)
	}
	check("KeepAlive with 3 leases and 2 groups")
	if err := b.Release(ctx, g.ID, "d", r.Token); err != nil {
		t.Fatal(err)
	}
	check("Release")
	if _, err := b.JoinGroup(ctx, g.ID, "e"); err != nil {
		t.Fatal(err)
	}
	check("JoinGroup")
	if err := b.LeaveGroup(ctx, g.ID, "e"); err != nil {
		t.Fatal(err)
	}
	check("LeaveGroup")
	if err := b.CloseSession(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	check("CloseSession")
}

func TestWatchRelease(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	a := openBackend(t, url, Options{KeyPrefix: prefix})
	w := openBackend(t, url, Options{KeyPrefix: prefix})
	ctx := callCtx(t)
	g, err := a.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := mustWin(t, a, g.ID, "n")
	mustWin(t, a, g.ID, "m")
	mustWin(t, a, g.ID, "x")
	chN := watchSubscribed(wctx, t, w, "n")
	chM, err := w.WatchRelease(wctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, g.ID, "n", r.Token+1); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, g.ID, "n", r.Token); err != nil {
		t.Fatal(err)
	}
	mustFire(t, chN, "n was released")
	select {
	case <-chM:
		t.Fatal("a watch of m fired on the release of n")
	case <-time.After(200 * time.Millisecond):
	}

	// A watch whose context ends is dropped.
	dctx, dcancel := context.WithCancel(ctx)
	if _, err := w.WatchRelease(dctx, "x"); err != nil {
		t.Fatal(err)
	}
	if got := w.notify.count("x"); got != 1 {
		t.Fatalf("%d watchers of x, want 1", got)
	}
	dcancel()
	for deadline := time.Now().Add(5 * time.Second); w.notify.count("x") != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a watcher whose context ended was not dropped")
		}
	}
	if _, err := w.WatchRelease(dctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchRelease with a done context = %v, want context.Canceled", err)
	}

	// A watch of a free lease fires at once: the release may have come
	// between the caller's last attempt and its watch.
	free, err := w.WatchRelease(wctx, "free")
	if err != nil {
		t.Fatal(err)
	}
	mustFire(t, free, "a watch of a free lease")
	rr := mustWin(t, a, g.ID, "free")
	if err := a.Release(ctx, g.ID, "free", rr.Token); err != nil {
		t.Fatal(err)
	}
	if n, err := rawClient(t, url).HExists(ctx, prefix+"lease:free", "w").Result(); err != nil || n {
		t.Fatalf("lease hash field w after a release = %v, %v; want none", n, err)
	}
}

func mustFire(t *testing.T, ch <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("watch not fired 5s after %s", why)
	}
}

// waitSubscribed waits until the notifier confirmed at least n
// subscriptions.
func (n *notifier) waitSubscribed(t *testing.T, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n.mu.Lock()
		got := n.subscriptions
		n.mu.Unlock()
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions confirmed after 10s, want %d", got, want)
		}
	}
}

// count returns the number of watchers of name.
func (n *notifier) count(name string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.waiters[name])
}

// TestLargeTokens: tokens beyond 2^53 (where a Lua number rounds) come back
// exact from Acquire and KeepAlive.
func TestLargeTokens(t *testing.T) {
	url := serverURL(t)
	b := openBackend(t, url, Options{})
	raw := rawClient(t, url)
	ctx := callCtx(t)
	const start = uint64(1)<<62 + 1
	if err := raw.HSet(ctx, b.KeyPrefix()+"lease:big", "token", start).Err(); err != nil {
		t.Fatal(err)
	}
	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := mustWin(t, b, g.ID, "big"); r.Token != start+1 {
		t.Fatalf("Acquire token = %d, want %d", r.Token, start+1)
	}
	reply, err := b.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: 5 * time.Second, Unsure: []string{"big"}})
	if err != nil || reply.Owned["big"] != start+1 {
		t.Fatalf("KeepAlive = %+v, %v; want token %d", reply, err, start+1)
	}
}
