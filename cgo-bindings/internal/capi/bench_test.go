package capi

import (
	"context"
	"testing"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// BenchmarkGoAcquireRelease is the baseline of the boundary cost: one
// acquire and one release of a lock in Go, on the memory backend.
func BenchmarkGoAcquireRelease(b *testing.B) {
	c, err := simba.New(memory.New().Connect(), simba.WithConfig(simba.Config{LeaseDuration: 3e9}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx := context.Background()
	l := c.Lock("bench")
	for b.Loop() {
		t, err := l.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := t.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandlesAcquireRelease is the same through the handle table and
// argument checks of the C API, without cgo: acquire, release and free.
func BenchmarkHandlesAcquireRelease(b *testing.B) {
	c, err := OpenClient("memory://bench-handles", Options{LeaseMS: 3000})
	if err != nil {
		b.Fatal(err)
	}
	defer CloseClient(c, 5000, 0)
	for b.Loop() {
		t, err := Acquire(c, "bench", 5000, 0, false)
		if err != nil {
			b.Fatal(err)
		}
		if err := Release(t, 5000); err != nil {
			b.Fatal(err)
		}
		if err := FreeTerm(t); err != nil {
			b.Fatal(err)
		}
	}
}
