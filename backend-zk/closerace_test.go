package simbazk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestCloseDuringQueueDirCreate closes a backend while its WatchRelease
// creates the queue directory of a held lease, over many rounds: the
// request in flight when the connection closes must not be read while the
// connection's receiver still decodes its answer (the race detector
// reports it when it is), and a request sent while it closes must not
// block Close.
func TestCloseDuringQueueDirCreate(t *testing.T) {
	holder, servers := newTestBackend(t, Options{})
	s := mustOpen(t, holder, 10*time.Second)
	root := holder.Root()

	deadline := time.Now().Add(20 * time.Second)
	rounds := 0
	for i := range 300 {
		if time.Now().After(deadline) {
			break
		}
		rounds++
		name := fmt.Sprintf("q%d", i)
		if r := mustAcquire(t, holder, s, name); !r.Won {
			t.Fatalf("%s not won", name)
		}
		b, err := New(servers, Options{Root: root, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		// Dial the read connection first, so that the watch goes straight
		// to its requests. The pause lets the library's connect finish
		// before a watch exists: with one registered, it reads its last
		// zxid unsynchronised (see watchConnLocked), a race of its own
		// that this test is not about.
		if _, _, err := b.Holder(ctx(t), name); err != nil {
			t.Fatalf("Holder: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
		var wg sync.WaitGroup
		wg.Go(func() {
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = b.WatchRelease(c, name)
		})
		time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
		closed := make(chan struct{})
		go func() { _ = b.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Close still blocked after 5s", i)
		}
		wg.Wait()
	}
	t.Logf("%d rounds", rounds)
}

// TestCloseSessionWithCallsInFlight: closing a session while its calls
// still send requests returns within a few seconds. The Zookeeper client
// answers a request queued while it closes once more than the request's
// channel holds when its write then fails, which blocks the client's
// goroutines for good, and with them CloseSession and Close, unless the
// session lets its requests end before it closes the client.
func TestCloseSessionWithCallsInFlight(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	paths := make([]string, 4*pipeline)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/n%d", b.leasesDir, i)
	}
	for round := range 20 {
		id := mustOpen(t, b, 10*time.Second)
		s, err := b.session(id)
		if err != nil {
			t.Fatal(err)
		}
		callCtx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				// The reads of a keep-alive, as its calls send them, until
				// the session refuses them.
				for callCtx.Err() == nil {
					if _, err := s.existsAll(callCtx, paths, false); errors.Is(err, errConnClosing) {
						return
					}
				}
			})
		}
		time.Sleep(30 * time.Millisecond)
		done := make(chan struct{})
		go func() {
			defer close(done)
			closeCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
			defer stop()
			_ = b.CloseSession(closeCtx, id)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: CloseSession with requests in flight still runs after 5s", round)
		}
		cancel()
		wg.Wait()
	}
	within(t, 3*time.Second, "Close after the sessions' calls", func() { _ = b.Close() })
}
