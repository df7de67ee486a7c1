package simbazk

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// BenchmarkKeepAlive measures one keep-alive of a session that holds n
// leases: when nothing changed since the last one ("unchanged": the
// renewal request alone), when one lease was won since ("one-won": it is
// read once, with a watch) and after a reconnect ("reconnected": every
// held lease is read again, pipelined). requests/op counts what the
// keep-alive sends the server.
func BenchmarkKeepAlive(b *testing.B) {
	for _, n := range []int{1, 100, 2000} {
		b.Run(fmt.Sprintf("L%d", n), func(b *testing.B) {
			be, _ := newTestBackend(b, Options{})
			id := mustOpen(b, be, 30*time.Second)
			s, err := be.session(id)
			if err != nil {
				b.Fatal(err)
			}
			req := simba.KeepAliveRequest{Held: acquireMany(b, be, s, n), Generation: 1}
			if lost := mustKeepAlive(b, be, id, req).Lost; len(lost) != 0 {
				b.Fatalf("keep-alive lost %v", lost)
			}
			for _, mode := range []string{"unchanged", "one-won", "reconnected"} {
				b.Run(mode, func(b *testing.B) {
					var reqs int64
					for b.Loop() {
						b.StopTimer()
						won := req
						switch mode {
						case "one-won":
							won.Held = maps.Clone(req.Held)
							won.Held["extra"] = mustAcquire(b, be, id, "extra").Token
							req.Generation += 2
							won.Generation = req.Generation - 1
						case "reconnected":
							s.distrustWatches()
						}
						before := s.requests.Load()
						b.StartTimer()
						if lost := mustKeepAlive(b, be, id, won).Lost; len(lost) != 0 {
							b.Fatalf("keep-alive lost %v", lost)
						}
						b.StopTimer()
						reqs += s.requests.Load() - before
						if tok := won.Held["extra"]; tok != 0 {
							if err := be.Release(ctx(b), id, "extra", tok); err != nil {
								b.Fatal(err)
							}
						}
						b.StartTimer()
					}
					b.ReportMetric(float64(reqs)/float64(b.N), "requests/op")
				})
			}
		})
	}
}

// acquireMany makes session s win n leases, 32 requests in flight, and
// returns them (name -> token).
func acquireMany(b testing.TB, be *Backend, s *session, n int) map[string]uint64 {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := make(map[string]uint64, n)
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				name := fmt.Sprintf("lease-%d", i)
				r, err := be.Acquire(ctx(b), s.id(), name)
				if err != nil || !r.Won {
					b.Errorf("Acquire %s: %+v, %v", name, r, err)
					return
				}
				mu.Lock()
				held[name] = r.Token
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return held
}

// BenchmarkAcquireRelease measures an uncontended acquire and release of
// one lease by one session.
func BenchmarkAcquireRelease(b *testing.B) {
	be, _ := newTestBackend(b, Options{})
	id := mustOpen(b, be, 30*time.Second)
	mustAcquire(b, be, id, "warm") // creates the parents
	before := requests(b, be, id)
	for b.Loop() {
		r := mustAcquire(b, be, id, "bench")
		if !r.Won {
			b.Fatal("not won")
		}
		if err := be.Release(ctx(b), id, "bench", r.Token); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(requests(b, be, id)-before)/float64(b.N), "requests/op")
}

// BenchmarkHandover times a clean handover between two nodes, each a
// Backend of its own, from the start of the holder's release to the
// waiter's win, three ways per iteration, interleaved: "backend" calls the
// backend directly (Acquire lost, WatchRelease, Acquire when it fires),
// "engine" goes through simba.Client locks, and "zklock" is go-zookeeper's
// lock recipe on the same server. Each reports its median in µs.
func BenchmarkHandover(b *testing.B) {
	be, servers := newTestBackend(b, Options{})
	const name = "handover"

	// backend: two sessions on two backends.
	var sides [2]struct {
		b  *Backend
		id simba.SessionID
	}
	for i := range sides {
		o, err := New(servers, Options{Root: be.Root(), Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = o.Close() })
		sides[i].b, sides[i].id = o, mustOpen(b, o, 10*time.Second)
	}
	holder := 0
	tok := mustAcquire(b, sides[0].b, sides[0].id, name).Token
	backendOnce := func() time.Duration {
		w := sides[1-holder]
		if r := mustAcquire(b, w.b, w.id, name); r.Won {
			b.Fatal("waiter won a held lease")
		}
		fired, err := w.b.WatchRelease(ctx(b), name)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // as long as the others wait before the release
		h := sides[holder]
		t0 := time.Now()
		if err := h.b.Release(ctx(b), h.id, name, tok); err != nil {
			b.Fatal(err)
		}
		<-fired
		r := mustAcquire(b, w.b, w.id, name)
		d := time.Since(t0)
		if !r.Won {
			b.Fatal("waiter lost after the release")
		}
		tok, holder = r.Token, 1-holder
		return d
	}

	// engine: two clients, one lock each.
	var locks [2]*simba.Lock
	for i := range locks {
		o, err := New(servers, Options{Root: be.Root() + "/engine", Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = o.Close() })
		c, err := simba.New(o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		locks[i] = c.Lock(name)
	}
	eholder := 0
	term, err := locks[0].Acquire(ctx(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = term.Release(context.Background()) })
	engineOnce := func() time.Duration {
		got := make(chan *simba.LockTerm, 1)
		go func() {
			t, err := locks[1-eholder].Acquire(ctx(b))
			if err != nil {
				b.Error(err)
			}
			got <- t
		}()
		time.Sleep(20 * time.Millisecond) // the waiter loses and watches
		t0 := time.Now()
		if err := term.Release(ctx(b)); err != nil {
			b.Fatal(err)
		}
		next := <-got
		d := time.Since(t0)
		if next == nil {
			b.FailNow()
		}
		term, eholder = next, 1-eholder
		return d
	}

	// zklock: go-zookeeper's recipe on two connections.
	var zl [2]*zk.Lock
	for i := range zl {
		a := dialAdmin(b, servers)
		b.Cleanup(a.close)
		zl[i] = zk.NewLock(a.conn, be.Root()+"/zklock", zk.WorldACL(zk.PermAll))
	}
	zholder := 0
	if err := zl[0].Lock(); err != nil {
		b.Fatal(err)
	}
	zklockOnce := func() time.Duration {
		done := make(chan time.Time, 1)
		go func() {
			if err := zl[1-zholder].Lock(); err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		time.Sleep(20 * time.Millisecond) // the waiter queues and watches
		t0 := time.Now()
		if err := zl[zholder].Unlock(); err != nil {
			b.Fatal(err)
		}
		d := (<-done).Sub(t0)
		zholder = 1 - zholder
		return d
	}
	b.Cleanup(func() { _ = zl[zholder].Unlock() })

	var lat [3][]time.Duration
	for b.Loop() {
		lat[0] = append(lat[0], backendOnce())
		lat[1] = append(lat[1], engineOnce())
		lat[2] = append(lat[2], zklockOnce())
	}
	for i, unit := range []string{"backend-p50-µs", "engine-p50-µs", "zklock-p50-µs"} {
		slices.Sort(lat[i])
		b.ReportMetric(float64(lat[i][len(lat[i])/2].Microseconds()), unit)
	}
}
