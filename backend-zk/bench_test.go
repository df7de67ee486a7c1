package simbazk

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// BenchmarkKeepAlive measures one keep-alive of a session that owns n
// leases, when no watch of its lease nodes fired since the last one
// ("unchanged": the renewal request alone) and when all did ("changed":
// every owned lease is read back, pipelined). requests/op counts what
// reaches the server.
func BenchmarkKeepAlive(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("L%d", n), func(b *testing.B) {
			be, _ := newTestBackend(b, Options{})
			id := mustOpen(b, be, 30*time.Second)
			s, err := be.session(id)
			if err != nil {
				b.Fatal(err)
			}
			acquireMany(b, be, s, n)
			if got := len(mustKeepAlive(b, be, id).Leases); got != n {
				b.Fatalf("keep-alive lists %d leases, want %d", got, n)
			}
			for _, changed := range []bool{false, true} {
				mode := "unchanged"
				if changed {
					mode = "changed"
				}
				b.Run(mode, func(b *testing.B) {
					before := s.requests.Load()
					for b.Loop() {
						if changed {
							s.mu.Lock()
							for name := range s.leases {
								s.suspects[name] = struct{}{}
							}
							s.mu.Unlock()
						}
						if got := len(mustKeepAlive(b, be, id).Leases); got != n {
							b.Fatalf("keep-alive lists %d leases, want %d", got, n)
						}
					}
					b.ReportMetric(float64(s.requests.Load()-before)/float64(b.N), "requests/op")
				})
			}
		})
	}
}

// acquireMany makes session s win n leases, 32 requests in flight.
func acquireMany(b testing.TB, be *Backend, s *session, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				r, err := be.Acquire(ctx(b), s.id(), fmt.Sprintf("lease-%d", i))
				if err != nil || !r.Won {
					b.Errorf("Acquire lease-%d: %+v, %v", i, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
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
