package simbasql

import (
	"fmt"
	"testing"
	"time"
)

func forEachDialectB(b *testing.B, fn func(b *testing.B, f *fixture)) {
	for _, d := range dialects {
		b.Run(string(d.name), func(b *testing.B) { fn(b, newFixture(b, d)) })
	}
}

// BenchmarkAcquireRelease: one uncontended term (acquire, then release)
// per iteration, on an existing lease row.
func BenchmarkAcquireRelease(b *testing.B) {
	forEachDialectB(b, func(b *testing.B, f *fixture) {
		be := f.backend()
		s := open(b, be, time.Minute)
		acquire(b, be, s, "bench") // create the row outside the loop
		ctx := ctxT(b)
		b.ResetTimer()
		for b.Loop() {
			r, err := be.Acquire(ctx, s, "bench")
			if err != nil || !r.Won {
				b.Fatalf("acquire: %+v, %v", r, err)
			}
			if err := be.Release(ctx, s, "bench", r.Token); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAcquireHeld: a candidate's attempt on a lease held by a live
// session (the steady state of every standby node).
func BenchmarkAcquireHeld(b *testing.B) {
	forEachDialectB(b, func(b *testing.B, f *fixture) {
		be := f.backend()
		owner, cand := open(b, be, time.Minute), open(b, be, time.Minute)
		acquire(b, be, owner, "bench")
		ctx := ctxT(b)
		for b.Loop() {
			if r, err := be.Acquire(ctx, cand, "bench"); err != nil || r.Won {
				b.Fatalf("acquire: %+v, %v", r, err)
			}
		}
	})
}

// BenchmarkKeepAlive: one keep-alive of a session holding L leases.
func BenchmarkKeepAlive(b *testing.B) {
	forEachDialectB(b, func(b *testing.B, f *fixture) {
		be := f.backend()
		for _, leases := range []int{1, 100, 10000} {
			b.Run(fmt.Sprintf("L%d", leases), func(b *testing.B) {
				s := open(b, be, time.Minute)
				for i := range leases {
					acquire(b, be, s, fmt.Sprintf("ka-%d-%d", leases, i))
				}
				ctx := ctxT(b)
				for b.Loop() {
					r, err := be.KeepAlive(ctx, s, time.Minute)
					if err != nil || len(r.Leases) != leases {
						b.Fatalf("keep-alive: %d leases, %v", len(r.Leases), err)
					}
				}
			})
		}
	})
}
