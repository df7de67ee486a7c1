package simbazk

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkKeepAlive measures one keep-alive of a session that owns n
// leases, when no lease node changed since the last one ("unchanged": the
// renewal request alone) and when one did ("changed": every owned lease
// is read back, pipelined). requests/op counts what reaches the server.
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
							s.verified = -1
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
func acquireMany(b *testing.B, be *Backend, s *session, n int) {
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
