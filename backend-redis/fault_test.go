package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// within fails the test when op took longer than limit.
func within(t *testing.T, limit time.Duration, what string, op func()) {
	t.Helper()
	start := time.Now()
	op()
	if took := time.Since(start); took > limit {
		t.Fatalf("%s took %v, want at most %v", what, took, limit)
	}
}

func TestUnreachableServer(t *testing.T) {
	serverURL(t)
	t.Run("refused", func(t *testing.T) {
		port := freePort(t) // closed again: nothing listens there
		var err error
		within(t, 2*time.Second, "Open of a closed port", func() {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			_, err = Open(ctx, fmt.Sprintf("redis://127.0.0.1:%d/0", port), Options{})
		})
		if err == nil || !strings.Contains(err.Error(), "connect to redis://127.0.0.1:") || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("Open of a closed port = %v, want an error naming the server and the refused dial", err)
		}
		t.Log(err)
	})
}

// TestStalledConnection freezes an established connection: the first
// watch returns at its context's end, and calls work again once the
// network delivers (the conformance suite checks the other calls).
func TestStalledConnection(t *testing.T) {
	url := serverURL(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	p := backendtest.NewProxy(t, opts.Addr)
	b := openBackend(t, "redis://"+p.Addr()+"/"+fmt.Sprint(opts.DB), Options{})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.Silence()
	// The first watch waits for the subscription, bounded by its context.
	var watchErr error
	within(t, 1500*time.Millisecond, "WatchRelease on a frozen connection with a 300ms context", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, watchErr = b.WatchRelease(ctx, "n")
	})
	if !errors.Is(watchErr, context.DeadlineExceeded) {
		t.Fatalf("WatchRelease on a frozen connection = %v, want context.DeadlineExceeded", watchErr)
	}
	p.Resume()
	if _, err := b.KeepAlive(ctx, g.ID, renewal(5*time.Second)); err != nil {
		t.Fatalf("KeepAlive after the network recovered: %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := watchSubscribed(wctx, t, b, "n")
	r := mustWin(t, b, g.ID, "n")
	if err := b.Release(ctx, g.ID, "n", r.Token); err != nil {
		t.Fatal(err)
	}
	mustFire(t, watch, "a release after the network recovered")
}

func TestAuthentication(t *testing.T) {
	const password, userPassword = "right-password-1", "user-password-2"
	s := startServer(t, "--requirepass", password)
	admin := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), Password: password})
	defer admin.Close()
	ctx := callCtx(t)
	// The README's least-rights user, without CONFIG as on managed Redis,
	// for the prefix the Backends below use.
	prefix := testPrefix()
	if err := admin.Do(ctx, readmeACL(t, prefix, userPassword)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	hostPort := fmt.Sprintf("127.0.0.1:%d", s.port)

	for _, tt := range []struct {
		name, url string
		opts      Options
		secret    string
	}{
		{name: "no password", url: "redis://" + hostPort},
		{name: "wrong password", url: "redis://:not-the-password-3@" + hostPort, secret: "not-the-password-3"},
		{name: "wrong user password", url: "redis://simba:not-the-password-4@" + hostPort, secret: "not-the-password-4"},
		{name: "unknown user", url: "redis://nobody:" + userPassword + "@" + hostPort, secret: userPassword},
		{name: "option overrides URL", url: "redis://:" + password + "@" + hostPort, opts: Options{Password: "not-the-password-5"}, secret: "not-the-password-5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Open(ctx, tt.url, tt.opts)
			if err == nil {
				_ = b.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("Open = %v, want ErrAuth", err)
			}
			if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
				t.Fatalf("the error shows the password: %v", err)
			}
			t.Log(err)
		})
	}

	// A user missing a command the scripts run is refused inside the script.
	acl := readmeACL(t, prefix, userPassword)
	acl[2] = "limited"
	acl = slices.DeleteFunc(acl, func(a any) bool { return a == "+hmget" })
	if err := admin.Do(ctx, acl...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	limited, err := Open(ctx, "redis://limited:"+userPassword+"@"+hostPort, Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Close()
	g, err := limited.OpenSession(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := limited.Acquire(ctx, g.ID, "n"); !errors.Is(err, ErrAuth) {
		t.Fatalf("Acquire by a user without HMGET = %v, want ErrAuth", err)
	}

	for _, tt := range []struct {
		name, url string
		opts      Options
	}{
		{name: "password in URL", url: "redis://:" + password + "@" + hostPort},
		{name: "ACL user in URL", url: "redis://simba:" + userPassword + "@" + hostPort},
		{name: "ACL user in options", url: "redis://" + hostPort, opts: Options{Username: "simba", Password: userPassword}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.KeyPrefix = prefix
			b, err := Open(ctx, tt.url, tt.opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer b.Close()
			useEveryOperation(t, b)
			// The ACL user cannot read maxmemory-policy: not a failure,
			// and no warning either way (the server says noeviction).
			if w := b.Warnings(); len(w) != 0 {
				t.Fatalf("Warnings() = %+v, want none", w)
			}
		})
	}
}

func TestEvictionPolicyWarning(t *testing.T) {
	s := startServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	ctx := callCtx(t)
	var got []Warning
	b := openBackend(t, s.url(), Options{Logger: quiet, OnWarning: func(w Warning) { got = append(got, w) }})
	for range 2 {
		g, err := b.OpenSession(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = b.CloseSession(ctx, g.ID)
	}
	if len(got) != 1 || got[0].Code != WarnEvictionPolicy || !strings.Contains(got[0].Message, "allkeys-lru") {
		t.Fatalf("OnWarning got %+v, want one %s naming allkeys-lru", got, WarnEvictionPolicy)
	}
	if w := b.Warnings(); len(w) != 1 || w[0] != got[0] {
		t.Fatalf("Warnings() = %+v, want %+v", w, got)
	}

	raw := rawClient(t, s.url())
	for policy, want := range map[string]bool{"volatile-ttl": true, "noeviction": false} {
		if err := raw.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		b := openBackend(t, s.url(), Options{Logger: quiet})
		g, err := b.OpenSession(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = b.CloseSession(ctx, g.ID)
		if warned := len(b.Warnings()) > 0; warned != want {
			t.Errorf("policy %s: warnings %+v, want a warning: %v", policy, b.Warnings(), want)
		}
	}
}

// TestScriptFlush: a server that forgot the scripts (SCRIPT FLUSH, a
// restart, a failover) gets them again transparently.
func TestScriptFlush(t *testing.T) {
	s := startServer(t)
	raw := rawClient(t, s.url())
	b := openBackend(t, s.url(), Options{})
	ctx := callCtx(t)
	flush := func() {
		t.Helper()
		if err := raw.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
	}
	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	flush()
	r := mustWin(t, b, g.ID, "n")
	flush()
	if n, err := b.JoinGroup(ctx, g.ID, "g"); err != nil || n != 1 {
		t.Fatalf("JoinGroup after SCRIPT FLUSH = %d, %v", n, err)
	}
	flush()
	reply, err := b.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: 5 * time.Second, Unsure: []string{"n"}})
	if err != nil || reply.Owned["n"] != r.Token || reply.Groups["g"] != 1 {
		t.Fatalf("KeepAlive after SCRIPT FLUSH = %+v, %v", reply, err)
	}
	flush()
	if err := b.Release(ctx, g.ID, "n", r.Token); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH: %v", err)
	}
	flush()
	if err := b.LeaveGroup(ctx, g.ID, "g"); err != nil {
		t.Fatalf("LeaveGroup after SCRIPT FLUSH: %v", err)
	}
	flush()
	if err := b.CloseSession(ctx, g.ID); err != nil {
		t.Fatalf("CloseSession after SCRIPT FLUSH: %v", err)
	}
	flush()
	if _, err := b.OpenSession(ctx, time.Second); err != nil {
		t.Fatalf("OpenSession after SCRIPT FLUSH: %v", err)
	}
}

// TestWrongTypeKeys: keys under the prefix that something else overwrote
// give clear errors (or, in a keep-alive, are skipped), never a panic.
func TestWrongTypeKeys(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	var warned []Warning
	b := openBackend(t, url, Options{Logger: quiet, OnWarning: func(w Warning) { warned = append(warned, w) }})
	p := b.KeyPrefix()
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sid := string(g.ID)
	wantWrongType := func(op string, err error, key string) {
		t.Helper()
		if !errors.Is(err, ErrWrongType) || !strings.Contains(err.Error(), key) {
			t.Fatalf("%s = %v, want ErrWrongType naming %s", op, err, key)
		}
		if strings.Contains(err.Error(), "script:") {
			t.Errorf("%s: the error carries script internals: %v", op, err)
		}
	}

	raw.Set(ctx, p+"lease:str", "x", 0)
	_, err = b.Acquire(ctx, g.ID, "str")
	wantWrongType("Acquire of a lease key holding a string", err, p+"lease:str")
	t.Log(err)
	wantWrongType("Release of a lease key holding a string", b.Release(ctx, g.ID, "str", 1), p+"lease:str")
	_, _, err = b.Holder(ctx, "str")
	wantWrongType("Holder of a lease key holding a string", err, p+"lease:str")
	raw.RPush(ctx, p+"group:list", "x")
	_, err = b.JoinGroup(ctx, g.ID, "list")
	wantWrongType("JoinGroup of a group key holding a list", err, p+"group:list")
	wantWrongType("LeaveGroup of a group key holding a list", b.LeaveGroup(ctx, g.ID, "list"), p+"group:list")
	if n, err := raw.Exists(ctx, p+"joined:"+sid).Result(); err != nil || n != 0 {
		t.Fatalf("failed calls left %d session keys behind (%v), want none", n, err)
	}
	if f, err := raw.HKeys(ctx, p+"session:"+sid).Result(); err != nil || len(f) != 1 {
		t.Fatalf("failed calls left session fields %v (%v), want only opened", f, err)
	}

	// Keys damaged after they were won or joined: the keep-alive skips
	// them (the lease is reported lost) and warns.
	ra := mustWin(t, b, g.ID, "a")
	rb := mustWin(t, b, g.ID, "b")
	held := simba.KeepAliveRequest{Lease: 5 * time.Second, Held: map[string]uint64{"a": ra.Token, "b": rb.Token}}
	for _, grp := range []string{"g", "h"} {
		if _, err := b.JoinGroup(ctx, g.ID, grp); err != nil {
			t.Fatal(err)
		}
	}
	raw.Del(ctx, p+"lease:a", p+"group:g")
	raw.SAdd(ctx, p+"lease:a", "x")
	raw.Set(ctx, p+"group:g", "x", 0)
	reply, err := b.KeepAlive(ctx, g.ID, held)
	if err != nil {
		t.Fatalf("KeepAlive with damaged keys: %v", err)
	}
	if !slices.Equal(reply.Lost, []string{"a"}) || len(reply.Groups) != 1 || reply.Groups["h"] != 1 {
		t.Fatalf("KeepAlive with damaged keys = %+v, want lease a lost and only group h", reply)
	}
	if len(warned) != 2 || warned[0].Code != WarnWrongTypeKey || warned[1].Code != WarnWrongTypeKey {
		t.Fatalf("warnings %+v, want two %s", warned, WarnWrongTypeKey)
	}
	if _, err := b.KeepAlive(ctx, g.ID, held); err != nil {
		t.Fatal(err)
	}
	if len(warned) != 2 {
		t.Fatalf("warnings %+v after a second keep-alive, want the same two (once each)", warned)
	}
	if err := b.CloseSession(ctx, g.ID); err != nil {
		t.Fatalf("CloseSession with damaged keys: %v", err)
	}

	// A damaged session key is an error, not an expiry: the session may
	// still own leases.
	g2, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := p + "session:" + string(g2.ID)
	raw.Del(ctx, key)
	raw.Set(ctx, key, "x", time.Minute)
	_, err = b.KeepAlive(ctx, g2.ID, renewal(5*time.Second))
	wantWrongType("KeepAlive of a session key holding a string", err, key)
	_, err = b.Acquire(ctx, g2.ID, "c")
	wantWrongType("Acquire by a session whose key holds a string", err, key)

	// The script of Acquire stops at the first key of the wrong type
	// without naming it; the error still names the key, and nothing was
	// written. Release reads only the lease hash, unless nodes wait.
	g4, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	re := mustWin(t, b, g4.ID, "e")
	raw.RPush(ctx, p+"floor", "x")
	_, err = b.Acquire(ctx, g4.ID, "never-used")
	wantWrongType("Acquire of a new name under a floor key holding a list", err, p+"floor")
	if n, err := raw.Exists(ctx, p+"lease:never-used").Result(); err != nil || n != 0 {
		t.Fatalf("the failed Acquire left a lease hash (%d, %v)", n, err)
	}
	raw.Del(ctx, p+"floor")
	key4 := p + "session:" + string(g4.ID)
	raw.Del(ctx, key4)
	raw.Set(ctx, key4, "x", time.Minute)
	if err := b.Release(ctx, g4.ID, "e", re.Token); err != nil {
		t.Fatalf("Release by a session whose key holds a string: %v", err)
	}
	if n, err := raw.HExists(ctx, p+"lease:e", "session").Result(); err != nil || n {
		t.Fatalf("Release by a session whose key holds a string left the lease owned (%v)", err)
	}

	// The owner's session key damaged after it won: Holder cannot tell
	// whether the owner lives.
	g3, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, b, g3.ID, "d")
	key = p + "session:" + string(g3.ID)
	raw.Del(ctx, key)
	raw.Set(ctx, key, "x", time.Minute)
	_, _, err = b.Holder(ctx, "d")
	wantWrongType("Holder of a lease whose owner's session key holds a string", err, key)
}

// TestServerRestart: a server restarted without persistence has lost
// every session: the next keep-alive and acquire say the session expired,
// and the release subscription comes back on its own.
func TestServerRestart(t *testing.T) {
	s := startServer(t)
	b := openBackend(t, s.url(), Options{})
	w := openBackend(t, s.url(), Options{KeyPrefix: b.KeyPrefix()})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := mustWin(t, b, g.ID, "n")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := watchSubscribed(wctx, t, w, "n")

	s.restart()

	// The pooled connection is dead; the driver redials (and may report
	// the broken connection once).
	var kaErr error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, kaErr = b.KeepAlive(ctx, g.ID, renewal(10*time.Second))
		if errors.Is(kaErr, simba.ErrSessionExpired) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("KeepAlive after a restart = %v, want ErrSessionExpired", kaErr)
		}
	}
	if _, err := b.Acquire(ctx, g.ID, "n"); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("Acquire after a restart = %v, want ErrSessionExpired", err)
	}
	mustFire(t, watch, "the subscription came back after a restart")
	w.notify.waitSubscribed(t, 2)

	// Without persistence the lease hash is gone too, yet the token does
	// not go back: it follows the server's clock (ADR 0020).
	g2, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	watch, err = w.WatchRelease(wctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Acquire(ctx, g2.ID, "n")
	if err != nil || !r2.Won || r2.Token <= r.Token {
		t.Fatalf("Acquire after a restart = %+v, %v; want a token above the %d before it", r2, err, r.Token)
	}
	if err := b.Release(ctx, g2.ID, "n", r2.Token); err != nil {
		t.Fatal(err)
	}
	mustFire(t, watch, "a release after the subscription came back")
}

// TestSubscriptionReconnect: when the server drops the subscription's
// connection, every watcher wakes (a release may have been missed) and
// later releases are delivered again.
func TestSubscriptionReconnect(t *testing.T) {
	s := startServer(t)
	raw := rawClient(t, s.url())
	b := openBackend(t, s.url(), Options{})
	ctx := callCtx(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watches := []<-chan struct{}{watchSubscribed(wctx, t, b, "first"), nil, nil}
	for i := 1; i < len(watches); i++ {
		ch, err := b.WatchRelease(wctx, fmt.Sprint("n", i))
		if err != nil {
			t.Fatal(err)
		}
		watches[i] = ch
	}
	if n, err := raw.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want 1 connection killed", n, err)
	}
	for i, ch := range watches {
		mustFire(t, ch, fmt.Sprintf("the subscription was killed (watch %d)", i))
	}
	b.notify.waitSubscribed(t, 2)

	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := b.WatchRelease(wctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, b, g.ID, "n")
	if err := b.CloseSession(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	mustFire(t, ch, "the owner closed its session after the reconnect")
}

// TestSubscriptionHealthCheck: a subscription whose connection silently
// stopped delivering is detected by an unanswered ping and replaced.
func TestSubscriptionHealthCheck(t *testing.T) {
	s := startServer(t)
	p := backendtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", s.port))
	b := openBackend(t, "redis://"+p.Addr()+"/0", Options{})
	b.notify.health = 100 * time.Millisecond
	ctx := callCtx(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := watchSubscribed(wctx, t, b, "n")
	p.Silence()
	time.Sleep(time.Second) // several health intervals
	p.Resume()
	mustFire(t, ch, "the frozen subscription was replaced")
	b.notify.waitSubscribed(t, 2)
}

// readmeACL returns the ACL SETUSER command the README recommends, for
// prefix and password, without the optional +config|get, +info and +wait.
func readmeACL(t *testing.T, prefix, password string) []any {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.Lines(string(readme)) {
		if strings.HasPrefix(l, "ACL SETUSER simba ") {
			line = strings.TrimSpace(l)
		}
	}
	if line == "" {
		t.Fatal("README.md has no ACL SETUSER line")
	}
	var args []any
	for _, f := range strings.Fields(line) {
		switch {
		case f == ">PASSWORD":
			f = ">" + password
		case f == "+config|get", f == "+info", f == "+wait":
			continue
		case strings.HasPrefix(f, "~simba:"), strings.HasPrefix(f, "&simba:"):
			f = f[:1] + prefix + f[len("~simba:"):]
		}
		args = append(args, f)
	}
	return args
}

// useEveryOperation runs every operation of b once, with a second Backend
// of the same server and prefix watching the release.
func useEveryOperation(t *testing.T, b *Backend) {
	t.Helper()
	ctx := callCtx(t)
	g, err := b.OpenSessionAs(ctx, 5*time.Second, "node-a")
	if err != nil {
		t.Fatalf("OpenSessionAs: %v", err)
	}
	r := mustWin(t, b, g.ID, "n")
	if h, ok, err := b.Holder(ctx, "n"); err != nil || !ok || h.Session != g.ID || h.Identity != "node-a" || h.Token != r.Token {
		t.Fatalf("Holder = %+v, %v, %v", h, ok, err)
	}
	if n, err := b.JoinGroup(ctx, g.ID, "g"); err != nil || n != 1 {
		t.Fatalf("JoinGroup = %d, %v", n, err)
	}
	reply, err := b.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: 5 * time.Second, Held: map[string]uint64{"n": r.Token}})
	if err != nil || len(reply.Lost) != 0 || reply.Groups["g"] != 1 {
		t.Fatalf("KeepAlive = %+v, %v", reply, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := watchSubscribed(wctx, t, b, "n")
	if err := b.Release(ctx, g.ID, "n", r.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustFire(t, watch, "the release")
	if err := b.LeaveGroup(ctx, g.ID, "g"); err != nil {
		t.Fatalf("LeaveGroup: %v", err)
	}
	if err := b.CloseSession(ctx, g.ID); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
}
