package simbaredis

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The benchmarks measure one operation on the test server over loopback;
// the comparison with other lock libraries lives in tools/bench.

func BenchmarkAcquireRelease(b *testing.B) {
	be := openBackend(b, serverURL(b), Options{})
	ctx := callCtx(b)
	g, err := be.OpenSession(ctx, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := be.Acquire(ctx, g.ID, "bench")
		if err != nil || !r.Won {
			b.Fatalf("Acquire = %+v, %v", r, err)
		}
		if err := be.Release(ctx, g.ID, "bench", r.Token); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeepAlive(b *testing.B) {
	for _, leases := range []int{1, 100, 10000, 100000} {
		b.Run(fmt.Sprintf("leases=%d", leases), func(b *testing.B) {
			be := openBackend(b, serverURL(b), Options{})
			ctx := callCtx(b)
			g, err := be.OpenSession(ctx, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			for i := range leases {
				if _, err := be.Acquire(ctx, g.ID, fmt.Sprint("bench.", i)); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				r, err := be.KeepAlive(ctx, g.ID, time.Minute)
				if err != nil || len(r.Leases) != leases {
					b.Fatalf("KeepAlive = %d leases, %v", len(r.Leases), err)
				}
			}
		})
	}
}

// BenchmarkClientMemoryPerLease reports the heap of a Simba client on this
// backend per held lease with 100,000 locks held (bytes/lease): the
// engine's terms and the Backend's view of what its session owns.
func BenchmarkClientMemoryPerLease(b *testing.B) {
	const n = 100_000
	url := serverURL(b)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("lease-%06d", i)
	}
	for b.Loop() {
		be := openBackend(b, url, Options{})
		c, err := simba.New(be, simba.WithConfig(simba.Config{LeaseDuration: time.Minute}))
		if err != nil {
			b.Fatal(err)
		}
		ctx := callCtx(b)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		held := make([]*simba.LockTerm, n)
		var wg sync.WaitGroup
		for w := range 64 {
			wg.Go(func() {
				for i := w; i < n; i += 64 {
					lt, err := c.Lock(names[i]).Acquire(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					held[i] = lt
				}
			})
		}
		wg.Wait()
		// One keep-alive makes the Backend hand out its view once.
		s := c.Snapshot().Session.ID
		if r, err := be.KeepAlive(ctx, s, time.Minute); err != nil || len(r.Leases) != n {
			b.Fatalf("KeepAlive = %d leases, %v", len(r.Leases), err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/lease")
		runtime.KeepAlive(held)
		_ = c.Close(ctx)
	}
}
