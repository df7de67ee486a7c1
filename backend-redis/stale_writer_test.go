package simbaredis

import (
	"context"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// TestStaleWriterRejected is R-FEN-1 end to end on a real Redis: node A
// holds a lock; its session disappears from the server (as after a pause
// longer than the lease: A cannot know yet); node B wins a newer term and
// writes through the fenced value; A's late write with its old token is
// rejected and leaves B's value in place.
func TestStaleWriterRejected(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	ctx := callCtx(t)
	cfg := simba.Config{LeaseDuration: 2 * time.Second, RenewInterval: 500 * time.Millisecond}
	newClient := func() *simba.Client {
		c, err := simba.New(openBackend(t, url, Options{KeyPrefix: prefix}), simba.WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	a, b := newClient(), newClient()
	fence, err := NewFence(rawClient(t, url), "ledger-"+strings.Trim(prefix, "{}:"))
	if err != nil {
		t.Fatal(err)
	}

	ta, err := a.Lock("ledger").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := fence.Write(ctx, ta.Token(), "A: batch 1"); !ok || err != nil {
		t.Fatalf("A's first write: %v %v", ok, err)
	}
	// The server loses A's session, as if A had been paused past its lease.
	if err := rawClient(t, url).Del(ctx, prefix+"session:"+string(ta.Session())).Err(); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tb, err := b.Lock("ledger").Acquire(actx)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Token() <= ta.Token() {
		t.Fatalf("B's token %d is not above A's %d", tb.Token(), ta.Token())
	}
	if ok, err := fence.Write(ctx, tb.Token(), "B: batch 2"); !ok || err != nil {
		t.Fatalf("B's write: %v %v", ok, err)
	}
	// A wakes up and finishes its write with the old token.
	if ok, err := fence.Write(ctx, ta.Token(), "A: late batch"); ok || err != nil {
		t.Fatalf("A's stale write accepted=%v err=%v, want rejected", ok, err)
	}
	if tok, v, err := fence.Read(ctx); err != nil || tok != tb.Token() || v != "B: batch 2" {
		t.Fatalf("fence = %d %q %v, want B's write", tok, v, err)
	}
	_ = tb.Close()
}
