package simbaredis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// holderOf returns b's Holder of name and fails the test on an error.
func holderOf(t *testing.T, b *Backend, name string) (simba.Holder, bool) {
	t.Helper()
	h, ok, err := b.Holder(callCtx(t), name)
	if err != nil {
		t.Fatalf("Holder(%q): %v", name, err)
	}
	return h, ok
}

// serverTime returns the server's TIME.
func serverTime(t *testing.T, raw *redis.Client) time.Time {
	t.Helper()
	now, err := raw.Time(callCtx(t)).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// TestHolder checks what Holder reports: the identity the owner's session
// was opened with, its token and the server time its term began, and
// nobody once the owner's session key expired, although the lease hash
// still names it.
func TestHolder(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	prefix := testPrefix()
	a := openBackend(t, url, Options{KeyPrefix: prefix})
	b := openBackend(t, url, Options{KeyPrefix: prefix})
	ctx := callCtx(t)
	const identity = "nœud-a:42 (ünïcode ✓)"

	ga, err := a.OpenSessionAs(ctx, 300*time.Millisecond, identity)
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := holderOf(t, b, "n"); ok {
		t.Fatalf("Holder of a lease never taken = %+v, want nobody", h)
	}
	before := serverTime(t, raw).Truncate(time.Millisecond)
	r := mustWin(t, a, ga.ID, "n")
	after := serverTime(t, raw)
	h, ok := holderOf(t, b, "n")
	switch {
	case !ok:
		t.Fatal("Holder = nobody, want the session that just won")
	case h.Session != ga.ID || h.Token != r.Token || h.Identity != identity:
		t.Fatalf("Holder = %+v, want session %s, token %d, identity %q", h, ga.ID, r.Token, identity)
	case h.Since.Before(before) || h.Since.After(after):
		t.Fatalf("Holder since %v, want the server time of the acquire, in [%v, %v]", h.Since, before, after)
	}

	// The owner stops renewing: once its session key expired the lease
	// hash still names it, but nobody holds the lease.
	sessionKey := prefix + "session:" + string(ga.ID)
	deadline := time.Now().Add(5 * time.Second)
	for raw.Exists(ctx, sessionKey).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not expire", sessionKey)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if owner := raw.HGet(ctx, prefix+"lease:n", "session").Val(); owner != string(ga.ID) {
		t.Fatalf("lease hash names %q after the owner expired, want still %s", owner, ga.ID)
	}
	if h, ok := holderOf(t, b, "n"); ok {
		t.Fatalf("Holder = %+v after its owner's session expired, want nobody", h)
	}

	// A session opened without an identity takes over: no identity, a
	// greater token, a later since.
	gb, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.CloseSession(context.Background(), gb.ID) })
	rb := mustWin(t, b, gb.ID, "n")
	h2, ok := holderOf(t, a, "n")
	switch {
	case !ok:
		t.Fatal("Holder = nobody after the take-over")
	case h2.Session != gb.ID || h2.Token <= r.Token || rb.Token != h2.Token || h2.Identity != "":
		t.Fatalf("Holder = %+v, want session %s, token %d (above %d), no identity", h2, gb.ID, rb.Token, r.Token)
	case h2.Since.Before(h.Since):
		t.Fatalf("Holder since %v, before the previous term's %v", h2.Since, h.Since)
	}

	// A lease hash written before since was recorded: the term's start is
	// unknown (zero), the rest is reported.
	raw.HDel(ctx, prefix+"lease:n", "since")
	if h, ok := holderOf(t, a, "n"); !ok || h.Session != gb.ID || h.Token != rb.Token || !h.Since.IsZero() {
		t.Fatalf("Holder of a lease hash without since = %+v, %v; want session %s, token %d, zero since", h, ok, gb.ID, rb.Token)
	}

	if err := b.Release(ctx, gb.ID, "n", rb.Token); err != nil {
		t.Fatal(err)
	}
	if h, ok := holderOf(t, a, "n"); ok {
		t.Fatalf("Holder = %+v after the release, want nobody", h)
	}
}

func TestOpenSessionAsRefusesBadIdentities(t *testing.T) {
	// Nothing listens on the client's port: a call that got through would
	// fail with a dial error instead.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	b, err := New(client, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close() // an open Backend takes go-redis's log lines from the tests after it
	for _, id := range []string{strings.Repeat("x", simba.MaxIdentity+1), "bad\xffutf8", "new\nline", "tab\there", "nul\x00"} {
		if _, err := b.OpenSessionAs(callCtx(t), time.Second, id); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("OpenSessionAs(identity %q) = %v, want ErrInvalidArgument", id, err)
		}
	}
}

// TestHolderIdentityLimits stores the longest identity and one of
// multi-byte characters unchanged.
func TestHolderIdentityLimits(t *testing.T) {
	url := serverURL(t)
	b := openBackend(t, url, Options{})
	for i, id := range []string{strings.Repeat("é", simba.MaxIdentity/2), "host.example:1234", "'quotes' \"and\" {braces}"} {
		g, err := b.OpenSessionAs(callCtx(t), 5*time.Second, id)
		if err != nil {
			t.Fatalf("OpenSessionAs(%q): %v", id, err)
		}
		name := "n" + string(rune('a'+i))
		mustWin(t, b, g.ID, name)
		if h, ok := holderOf(t, b, name); !ok || h.Identity != id {
			t.Fatalf("Holder = %+v, %v; want identity %q", h, ok, id)
		}
		if err := b.CloseSession(callCtx(t), g.ID); err != nil {
			t.Fatal(err)
		}
		if h, ok := holderOf(t, b, name); ok {
			t.Fatalf("Holder = %+v after CloseSession, want nobody", h)
		}
	}
}
