package simbaredis

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestCoalescedCalls runs many acquires and releases of one Backend at once,
// some after the server's script cache was flushed: batches are pipelined,
// and every call gets its own, correct reply.
func TestCoalescedCalls(t *testing.T) {
	url := serverURL(t)
	b := openBackend(t, url, Options{KeyPrefix: testPrefix()})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rival, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, b, rival.ID, "taken")
	var last sync.Map // name -> the token of its previous round
	for round := range 3 {
		if round == 1 {
			if err := rawClient(t, url).ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				name := fmt.Sprintf("c%d", i)
				r, err := b.Acquire(ctx, g.ID, name)
				prev, _ := last.Load(name)
				if err != nil || !r.Won || (prev != nil && r.Token <= prev.(uint64)) {
					t.Errorf("round %d: Acquire(%s) = %+v, %v; want won with a token above the last round's %v", round, name, r, err, prev)
					return
				}
				last.Store(name, r.Token)
				if r, err := b.Acquire(ctx, g.ID, "taken"); err != nil || r.Won {
					t.Errorf("Acquire of a lease held by another session = %+v, %v", r, err)
				}
				if err := b.Release(ctx, g.ID, name, r.Token); err != nil {
					t.Errorf("Release(%s): %v", name, err)
				}
			})
		}
		wg.Wait()
	}
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	reply, err := b.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: 10 * time.Second, Unsure: names})
	if err != nil || len(reply.Owned) != 0 {
		t.Fatalf("after every release the session owns %v (%v)", reply.Owned, err)
	}
	// A cancelled caller gets its ctx's error without failing the others.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Acquire(cctx, g.ID, "cancelled"); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
}

// TestCoalescedLeaderKeepsItsDeadline: a call that finds other calls
// pending (they came in between its enqueue and its send) returns when its
// own context ends, not at the latest deadline of the batch it leads,
// here against a server that never answers.
func TestCoalescedLeaderKeepsItsDeadline(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: backendtest.SilentListener(t), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	q := &coalescer{client: client}
	late, cancelLate := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancelLate()
	mate := &scriptCall{ctx: late, script: releaseScript, keys: []string{"k"}, done: make(chan struct{})}
	q.pending = []*scriptCall{mate}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	within(t, 600*time.Millisecond, "a call with a 100ms deadline leading a batch with a 1.5s one", func() {
		if _, _, err := q.run(ctx, false, releaseScript, []string{"k"}, "s", "1", "c", "k"); err == nil {
			t.Error("a call to a server that never answers succeeded")
		}
	})
	select {
	case <-mate.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the batch-mate got no reply 5s after its deadline")
	}
}
