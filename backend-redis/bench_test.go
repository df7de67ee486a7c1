package simbaredis

import (
	"fmt"
	"testing"
	"time"
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
	for _, leases := range []int{1, 100, 10000} {
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
