package simba_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

func benchTerm(b *testing.B) (*simba.Client, *simba.Term) {
	c, err := simba.New(memory.New(), simba.WithConfig(simba.Config{LeaseDuration: time.Hour}))
	if err != nil {
		b.Fatal(err)
	}
	lt, err := c.Lock("bench").Acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return c, lt.Term
}

func BenchmarkTermValid(b *testing.B) {
	c, t := benchTerm(b)
	defer c.Close(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		if !t.Valid() {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkTermRemaining(b *testing.B) {
	c, t := benchTerm(b)
	defer c.Close(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		if t.Remaining() <= 0 {
			b.Fatal("ended")
		}
	}
}

// BenchmarkAcquireRelease is an uncontended lock acquire and release on
// the memory backend: the engine's own cost.
func BenchmarkAcquireRelease(b *testing.B) {
	// events: an event listener that does nothing, as the cost of the
	// events themselves (a metrics listener adds its own work on top).
	for _, tt := range []struct {
		name string
		opts []simba.Option
	}{
		{"events=off", nil},
		{"events=on", []simba.Option{simba.WithEventListener(func(context.Context, simba.Event) {})}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			c, err := simba.New(memory.New(), tt.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			l := c.Lock("bench")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lt, err := l.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := lt.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAcquireReleaseParallel is acquire and release by 64 goroutines
// at once, each on a name of its own, on one client: what the client's
// lock costs when every caller needs it.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	c, err := simba.New(memory.New())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	var next atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		l := c.Lock(fmt.Sprintf("bench.%d", next.Add(1)))
		ctx := context.Background()
		for pb.Next() {
			lt, err := l.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := lt.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMemoryPerLease reports the client's heap per held lease with
// 100 000 locks held (bytes/lease).
func BenchmarkMemoryPerLease(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		s := memory.New()
		c, err := simba.New(s, simba.WithConfig(simba.Config{LeaseDuration: time.Hour}))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		// Names and the backend's records are not the client's cost:
		// allocate them before the first reading.
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("lease-%06d", i)
		}
		warm := make([]*simba.LockTerm, 0, n)
		for _, name := range names {
			lt, err := c.Lock(name).Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			warm = append(warm, lt)
		}
		for _, lt := range warm {
			_ = lt.Release(ctx)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		held := make([]*simba.LockTerm, 0, n)
		for _, name := range names {
			lt, err := c.Lock(name).Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			held = append(held, lt)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/lease")
		runtime.KeepAlive(held)
		_ = c.Close(ctx)
	}
}
