package simbasql

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// TestEngineLocks drives the backend through the engine: two clients, on
// backends with their own connection pools, contend for one lock; the
// second gets it after the first releases, with a higher token, and gets
// it after the first client closes without releasing.
func TestEngineLocks(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		cfg := simba.Config{LeaseDuration: 3 * time.Second}
		quiet := slog.New(slog.DiscardHandler)
		newClient := func() *simba.Client {
			b, err := Open(ctxT(t), f.openURL(), Options{TablePrefix: f.prefix, Migrate: true})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { b.Close() })
			c, err := simba.New(b, simba.WithConfig(cfg), simba.WithLogger(quiet))
			if err != nil {
				t.Fatalf("simba.New: %v", err)
			}
			t.Cleanup(func() { c.Close(context.Background()) })
			return c
		}
		a, b := newClient(), newClient()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ta, err := a.Lock("engine").Acquire(ctx)
		if err != nil {
			t.Fatalf("a: Acquire: %v", err)
		}
		if _, err := b.Lock("engine").TryAcquire(ctx); !errors.Is(err, simba.ErrLockHeld) {
			t.Fatalf("b: TryAcquire of a held lock: %v, want ErrLockHeld", err)
		}
		if err := ta.Release(ctx); err != nil {
			t.Fatalf("a: Release: %v", err)
		}
		tb, err := b.Lock("engine").Acquire(ctx)
		if err != nil {
			t.Fatalf("b: Acquire after the release: %v", err)
		}
		if tb.Token() <= ta.Token() {
			t.Fatalf("b's token %d, want more than a's %d", tb.Token(), ta.Token())
		}
		if !tb.Valid() {
			t.Fatal("b's fresh term is not valid")
		}

		// b closes its client without releasing: a takes over at once,
		// since closing the session frees its leases.
		if err := b.Close(ctx); err != nil {
			t.Fatalf("b: Close: %v", err)
		}
		if tb.Valid() {
			t.Fatal("b's term is still valid after its client closed")
		}
		ta2, err := a.Lock("engine").Acquire(ctx)
		if err != nil {
			t.Fatalf("a: Acquire after b closed: %v", err)
		}
		if ta2.Token() <= tb.Token() {
			t.Fatalf("a's new token %d, want more than b's %d", ta2.Token(), tb.Token())
		}
		ta2.Close()
	})
}
