package simbaredis

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReleaseWakesTheFirstWaiter: a release is announced to the first
// node waiting for the lease only; the next release to the next node; a
// node told of a release it no longer waits for hands it on.
func TestReleaseWakesTheFirstWaiter(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	owner := openBackend(t, url, Options{KeyPrefix: prefix})
	raw := rawClient(t, url)
	ctx := callCtx(t)
	g, err := owner.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tok := mustWin(t, owner, g.ID, "n").Token
	var nodes [3]*Backend
	var watches [3]<-chan struct{}
	for i := range nodes {
		nodes[i] = openBackend(t, url, Options{KeyPrefix: prefix})
		watches[i] = watchSubscribed(wctx, t, nodes[i], "n")
	}
	quiet := func(i int, why string) {
		t.Helper()
		select {
		case <-watches[i]:
			t.Fatalf("waiter %d woken: %s", i, why)
		case <-time.After(200 * time.Millisecond):
		}
	}
	handOver := func() {
		t.Helper()
		if err := owner.Release(ctx, g.ID, "n", tok); err != nil {
			t.Fatal(err)
		}
		tok = mustWin(t, owner, g.ID, "n").Token
	}

	handOver()
	mustFire(t, watches[0], "the first waiter was handed the release")
	quiet(1, "the release went to the first waiter")
	quiet(2, "the release went to the first waiter")

	// Nodes 1 and 2 give up: they leave the queue. Node 0 is told of the
	// next release although it no longer waits (queued again by hand, as a
	// node whose watch ended while its message was on the way): it hands
	// the release on to node 1, which waits again (while the lease is
	// free: a lease taken meanwhile is handed on by its next release).
	cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := raw.ZCard(ctx, prefix+"waiters:n").Result(); n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %v after every watch ended, want it empty", raw.ZRange(ctx, prefix+"waiters:n", 0, -1).Val())
		}
	}
	wctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	raw.ZAdd(ctx, prefix+"waiters:n", redis.Z{Score: 0, Member: nodes[0].notify.id})
	raw.HSet(ctx, prefix+"lease:n", "w", 1)
	second := watchSubscribed(wctx2, t, nodes[1], "n")
	if err := owner.Release(ctx, g.ID, "n", tok); err != nil {
		t.Fatal(err)
	}
	mustFire(t, second, "node 0 handed the release on to node 1")
	if n, err := raw.ZCard(ctx, prefix+"waiters:n").Result(); err != nil || n != 0 {
		t.Fatalf("queue of %d after the hand-on (%v), want empty", n, err)
	}
}

// A subscription confirmed after the notifier was closed (the confirmation
// was in flight when close ran) must not close the ready channel again.
func TestSubscribedAfterCloseIsIgnored(t *testing.T) {
	n := newNotifier(nil, "released", "node", slog.New(slog.DiscardHandler), nil, nil)
	n.close()
	n.subscribed() // panicked with "close of closed channel"
	select {
	case <-n.ready:
	default:
		t.Fatal("ready is open after close")
	}
	if n.live {
		t.Fatal("the notifier went live after close")
	}
}

// TestCloseLeavesTheQueue: a Backend that closes while queued for a lease,
// or right after its watch of it ended, leaves the lease's queue, so the
// next release wakes the live waiter behind it (ADR 0011), rather than
// being announced to the closed Backend's channel, where nobody listens.
func TestCloseLeavesTheQueue(t *testing.T) {
	url := serverURL(t)
	for _, tt := range []struct {
		give        string
		cancelFirst bool // the application ends the watch, then closes
	}{
		{give: "while watching"},
		{give: "right after its watch ended", cancelFirst: true},
	} {
		t.Run(tt.give, func(t *testing.T) {
			prefix := testPrefix()
			holder := openBackend(t, url, Options{KeyPrefix: prefix})
			gone := openBackend(t, url, Options{KeyPrefix: prefix})
			live := openBackend(t, url, Options{KeyPrefix: prefix})
			ctx := callCtx(t)
			g, err := holder.OpenSession(ctx, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			tok := mustWin(t, holder, g.ID, "n").Token
			gctx, gcancel := context.WithCancel(ctx)
			defer gcancel()
			watchSubscribed(gctx, t, gone, "n")
			woken := watchSubscribed(ctx, t, live, "n")
			if tt.cancelFirst {
				gcancel()
			}
			if err := gone.Close(); err != nil {
				t.Fatal(err)
			}
			if err := holder.Release(ctx, g.ID, "n", tok); err != nil {
				t.Fatal(err)
			}
			select {
			case <-woken:
			case <-time.After(2 * time.Second):
				t.Fatalf("the live waiter was not woken 2s after the release; queue %v, closed Backend %s",
					rawClient(t, url).ZRange(ctx, prefix+"waiters:n", 0, -1).Val(), gone.notify.id)
			}
		})
	}
}

// TestRewatchStaysQueued: a watch of a name made right after the last
// watch of it ended keeps the Backend in the lease's queue: the ZREM of
// the watch that ended never lands after the new watch's queueing.
func TestRewatchStaysQueued(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	holder := openBackend(t, url, Options{KeyPrefix: prefix})
	w := openBackend(t, url, Options{KeyPrefix: prefix})
	raw := rawClient(t, url)
	ctx := callCtx(t)
	g, err := holder.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, holder, g.ID, "n")
	wctx, cancel := context.WithCancel(ctx)
	watchSubscribed(wctx, t, w, "n")
	missing := 0
	const rounds = 100
	for range rounds {
		cancel()
		for w.notify.count("n") != 0 { // dropped: its ZREM is on the way
			time.Sleep(50 * time.Microsecond)
		}
		wctx, cancel = context.WithCancel(ctx)
		if _, err := w.WatchRelease(wctx, "n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		if err := raw.ZScore(ctx, prefix+"waiters:n", w.notify.id).Err(); errors.Is(err, redis.Nil) {
			missing++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if missing > 0 {
		t.Fatalf("the Backend was out of the queue after %d of %d watches made right after one ended", missing, rounds)
	}
}

// TestWatchRacingCloseLeavesNoQueueEntry: a watch whose queueing reaches
// the server after Close took the Backend out of the queues takes it out
// again: the closed Backend would otherwise be first in line for the next
// release, which would then wake nobody.
func TestWatchRacingCloseLeavesNoQueueEntry(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	holder := openBackend(t, url, Options{KeyPrefix: prefix})
	ctx := callCtx(t)
	g, err := holder.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, holder, g.ID, "n")
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	gate := &scriptGate{key: prefix + "waiters:n", reached: make(chan struct{}), open: make(chan struct{})}
	client.AddHook(gate)
	b, err := New(client, Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.WatchRelease(ctx, "n")
		done <- err
	}()
	<-gate.reached // the queueing script is about to be sent
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	close(gate.open)
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("WatchRelease across Close = %v, want ErrClosed", err)
	}
	if q := rawClient(t, url).ZRange(ctx, prefix+"waiters:n", 0, -1).Val(); slices.Contains(q, b.notify.id) {
		t.Fatalf("the closed Backend %s is still in the queue %v", b.notify.id, q)
	}
}

// scriptGate holds the first script call that names key until open is
// closed, and closes reached when it gets there.
type scriptGate struct {
	key     string
	once    sync.Once
	reached chan struct{}
	open    chan struct{}
}

func (g *scriptGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *scriptGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && slices.Contains(cmd.Args(), any(g.key)) {
			g.once.Do(func() {
				close(g.reached)
				<-g.open
			})
		}
		return next(ctx, cmd)
	}
}

func (g *scriptGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
