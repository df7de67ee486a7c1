package simbasql

import (
	"context"
	"log/slog"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// TestStaleWriterRejected is R-FEN-1 end to end on both servers: node A
// holds a lock; its session expires on the database (as after a pause
// longer than the lease, or a clock step on the database host) while A's
// local deadline has not passed; node B wins a newer term and writes
// through the fence; A's late write with its old token is rejected and
// leaves B's value in place.
func TestStaleWriterRejected(t *testing.T) {
	fences := map[Dialect]fenceClient{Postgres: fenceClients[1], MySQL: fenceClients[2]}
	forEachDialect(t, func(t *testing.T, f *fixture) {
		ctx := ctxT(t)
		cfg := simba.Config{LeaseDuration: 3 * time.Second}
		newClient := func() *simba.Client {
			b, err := Open(ctx, f.openURL(), Options{TablePrefix: f.prefix, Migrate: true})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { b.Close() })
			c, err := simba.New(b, simba.WithConfig(cfg), simba.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(context.Background()) })
			return c
		}
		a, b := newClient(), newClient()
		x := newFenceFixture(t, fences[f.dialect])
		key := x.newKey(t)
		write := func(token uint64, v string) bool {
			t.Helper()
			ok, err := x.conn.write(ctx, x.fence, key, token, v)
			if err != nil {
				t.Fatalf("write(%d, %q): %v", token, v, err)
			}
			return ok
		}

		ta, err := a.Lock("ledger").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !write(ta.Token(), "A: batch 1") {
			t.Fatal("A's first write rejected")
		}
		f.expire(ta.Session())
		tb, err := b.Lock("ledger").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tb.Token() <= ta.Token() {
			t.Fatalf("B's token %d is not above A's %d", tb.Token(), ta.Token())
		}
		if !write(tb.Token(), "B: batch 2") {
			t.Fatal("B's write rejected")
		}
		if write(ta.Token(), "A: late batch") {
			t.Fatal("A's stale write was accepted")
		}
		if tok, v, err := x.conn.row(ctx, x.table, key); err != nil || tok != tb.Token() || v != "B: batch 2" {
			t.Fatalf("row = %d %q %v, want B's write", tok, v, err)
		}
		_ = tb.Close()
	})
}
