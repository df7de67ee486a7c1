package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	simba "github.com/simba-go/simba/core"
)

// sweepSession opens a backend on the test server, a plain client, and a
// session of the backend; p is the backend's key prefix.
func sweepSession(t *testing.T) (url string, raw *redis.Client, b *Backend, p string, ctx context.Context, g simba.SessionGrant) {
	t.Helper()
	url = serverURL(t)
	raw = rawClient(t, url)
	b = openBackend(t, url, Options{})
	ctx = callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return url, raw, b, b.KeyPrefix(), ctx, g
}

// TestSweep: Sweep removes the lease hashes nobody holds or waits for and
// that were idle long enough, raises the floor to the highest token
// removed, and a name used again starts above it.
func TestSweep(t *testing.T) {
	url, raw, b, p, ctx, g := sweepSession(t)
	if _, err := b.Sweep(ctx, time.Millisecond); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Sweep(1ms) = %v, want ErrInvalidOptions", err)
	}
	old := func(name string) { raw.HSet(ctx, p+"lease:"+name, "since", 1) }
	var idleTok uint64
	for i := range 1200 { // several batches
		name := fmt.Sprint("idle.", i)
		r := mustWin(t, b, g.ID, name)
		r2 := mustWin(t, b, g.ID, name) // a second term
		if err := b.Release(ctx, g.ID, name, r2.Token); err != nil {
			t.Fatal(err)
		}
		old(name)
		idleTok = max(idleTok, r.Token, r2.Token)
	}
	mustWin(t, b, g.ID, "held")
	old("held")
	r := mustWin(t, b, g.ID, "recent")
	if err := b.Release(ctx, g.ID, "recent", r.Token); err != nil {
		t.Fatal(err)
	}
	waited := mustWin(t, b, g.ID, "waited")
	old("waited")
	other := openBackend(t, url, Options{KeyPrefix: p})
	if _, err := other.WatchRelease(ctx, "waited"); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, g.ID, "waited", waited.Token); err != nil {
		t.Fatal(err)
	}
	// The release handed the lease to the waiter's queue entry: queue
	// another one so that the lease is still waited for. A field w left
	// by waiters that gave up does not keep an idle lease.
	raw.HSet(ctx, p+"lease:waited", "w", 1)
	raw.ZAdd(ctx, p+"waiters:waited", redis.Z{Score: 1, Member: "someone"})
	raw.HSet(ctx, p+"lease:idle.3", "w", 5)
	raw.HSet(ctx, p+"lease:legacy", "token", 7)
	raw.Set(ctx, p+"lease:string", "x", 0)
	raw.Set(ctx, p+"floor", "1", 0)

	n, err := b.Sweep(ctx, time.Hour)
	if err != nil || n != 1200 {
		t.Fatalf("Sweep = %d, %v; want the 1200 idle leases removed", n, err)
	}
	for _, name := range []string{"held", "recent", "waited", "legacy", "string"} {
		if ok, _ := raw.Exists(ctx, p+"lease:"+name).Result(); ok != 1 {
			t.Errorf("lease %s was removed", name)
		}
	}
	if f, err := raw.Get(ctx, p+"floor").Result(); err != nil || f != strconv.FormatUint(idleTok, 10) {
		t.Fatalf("floor = %q, %v; want %d, the highest token removed", f, err, idleTok)
	}
	if r := mustWin(t, b, g.ID, "idle.7"); r.Token <= idleTok {
		t.Fatalf("a removed name came back with token %d, want it above the floor %d", r.Token, idleTok)
	}
	if r := mustWin(t, b, g.ID, "new"); r.Token <= idleTok {
		t.Fatalf("a new name starts at token %d, want it above the floor %d", r.Token, idleTok)
	}
	if n, err := b.Sweep(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want nothing left to remove", n, err)
	}
	if f, _ := raw.Get(ctx, p+"floor").Result(); f != strconv.FormatUint(idleTok, 10) {
		t.Fatalf("floor moved to %q by a sweep that removed nothing", f)
	}
}

// TestSweepWideFloor: a name without a lease hash starts above a floor
// too wide for a Lua number (9 * 10^15 or more), as above a narrow one.
func TestSweepWideFloor(t *testing.T) {
	_, raw, b, p, ctx, g := sweepSession(t)
	const wide = "9000000000000000"
	raw.HSet(ctx, p+"lease:wide", "session", "gone", "token", wide, "since", 1)
	if n, err := b.Sweep(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want the idle lease removed", n, err)
	}
	if f, _ := raw.Get(ctx, p+"floor").Result(); f != wide {
		t.Fatalf("floor = %q, want %s", f, wide)
	}
	for _, name := range []string{"wide", "fresh"} {
		if r := mustWin(t, b, g.ID, name); r.Token != 9000000000000001 {
			t.Errorf("%s starts at token %d, want 9000000000000001 (above the floor)", name, r.Token)
		}
	}
}

// TestCloseManyLeases: closing a session with more leases nodes wait for
// than one script clears frees them all, tidies their lease hashes and
// wakes their watchers.
func TestCloseManyLeases(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	b := openBackend(t, url, Options{})
	other := openBackend(t, url, Options{KeyPrefix: b.KeyPrefix()})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*closeBatch + 7
	for i := range n {
		mustWin(t, b, g.ID, fmt.Sprint("c.", i))
	}
	// Nodes wait for every lease, so that the session hash names them all.
	watch := watchSubscribed(ctx, t, other, fmt.Sprint("c.", n-1))
	for i := range n - 1 {
		if _, err := other.WatchRelease(ctx, fmt.Sprint("c.", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.CloseSession(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	mustFire(t, watch, "the owner of a watched lease closed")
	for i := range n {
		if v, err := raw.HGet(ctx, b.KeyPrefix()+"lease:"+fmt.Sprint("c.", i), "session").Result(); err == nil {
			t.Fatalf("lease c.%d still names session %s after the close", i, v)
		}
	}
	g2, err := other.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, other, g2.ID, "c.0")
}
