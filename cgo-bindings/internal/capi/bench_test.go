package capi

import (
	"context"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// BenchmarkGoAcquireRelease is the baseline of the boundary cost: one
// acquire and one release of a lock in Go, on the memory backend.
func BenchmarkGoAcquireRelease(b *testing.B) {
	c, err := simba.New(memory.New().Connect(), simba.WithConfig(simba.Config{LeaseDuration: 3 * time.Second}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	l := c.Lock("bench")
	for b.Loop() {
		// The C call takes a timeout: the Go equivalent is a ctx with one.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t, err := l.Acquire(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		err = t.Release(ctx)
		cancel()
		if err != nil {
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
	defer func() { _ = CloseClient(c, 5000, 0) }()
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
