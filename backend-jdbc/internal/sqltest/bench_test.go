package sqltest

import (
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/core/backendtest"

	simba "github.com/simba-go/simba/core"
)

// Bench runs the benchmarks of h against its test server.
func Bench(b *testing.B, h Harness) {
	raw := backendtest.ServerEnv(b, h.EnvVar)
	for _, bm := range []struct {
		name string
		fn   func(b *testing.B, f *fixture)
	}{
		{"AcquireRelease", benchAcquireRelease},
		{"AcquireHeld", benchAcquireHeld},
		{"KeepAlive", benchKeepAlive},
	} {
		b.Run(bm.name, func(b *testing.B) { bm.fn(b, newFixture(b, &h, raw)) })
	}
}

// benchAcquireRelease: one uncontended term (acquire, then release)
// per iteration, on an existing lease row.
func benchAcquireRelease(b *testing.B, f *fixture) {
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
}

// benchAcquireHeld: a candidate's attempt on a lease held by a live
// session (the steady state of every standby node).
func benchAcquireHeld(b *testing.B, f *fixture) {
	be := f.backend()
	owner, cand := open(b, be, time.Minute), open(b, be, time.Minute)
	acquire(b, be, owner, "bench")
	ctx := ctxT(b)
	for b.Loop() {
		if r, err := be.Acquire(ctx, cand, "bench"); err != nil || r.Won {
			b.Fatalf("acquire: %+v, %v", r, err)
		}
	}
}

// benchKeepAlive: one keep-alive of a session holding L leases.
func benchKeepAlive(b *testing.B, f *fixture) {
	be := f.backend()
	for _, leases := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("L%d", leases), func(b *testing.B) {
			s := open(b, be, time.Minute)
			req := simba.KeepAliveRequest{Lease: time.Minute, Held: map[string]uint64{}, Generation: 1}
			for i := range leases {
				name := fmt.Sprintf("ka-%d-%d", leases, i)
				req.Held[name] = acquire(b, be, s, name).Token
			}
			ctx := ctxT(b)
			for b.Loop() {
				r, err := be.KeepAlive(ctx, s, req)
				if err != nil || len(r.Lost) != 0 {
					b.Fatalf("keep-alive: lost %v, %v", r.Lost, err)
				}
			}
		})
	}
}
