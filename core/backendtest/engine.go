package backendtest

import (
	"context"
	"errors"
	"io"
	"log/slog"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/fencingtest"
)

// client returns a client of the engine on a new node, with identity,
// closed when the check ends.
func (e *env) client(identity string) *simba.Client {
	e.t.Helper()
	c, err := simba.New(e.node(), simba.WithConfig(simba.Config{LeaseDuration: max(e.h.Lease, 3*DefaultLease/2)}),
		simba.WithLogger(slog.New(slog.DiscardHandler)), simba.WithIdentity(identity))
	if err != nil {
		e.t.Fatalf("simba.New: %v", err)
	}
	e.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// testEngineLocks drives the backend through the engine: two clients
// contend for one lock; the second is refused while the first holds it,
// sees it as the holder (for a simba.HolderReader), gets it after the
// release with a higher token, and the first gets it back at once when
// the second closes without releasing.
func testEngineLocks(e *env) {
	a, b := e.client("node-a"), e.client("node-b")
	ctx, cancel := e.ctx()
	defer cancel()
	n := e.name("n")
	ta, err := a.Lock(n).Acquire(ctx)
	if err != nil {
		e.t.Fatalf("a: Acquire: %v", err)
	}
	if _, err := b.Lock(n).TryAcquire(ctx); !errors.Is(err, simba.ErrLockHeld) {
		e.t.Fatalf("b: TryAcquire of a held lock = %v, want ErrLockHeld", err)
	}
	if _, ok := e.node().(simba.HolderReader); ok {
		h, held, err := b.Holder(ctx, n)
		if err != nil || !held || h.Identity != "node-a" || h.Token != ta.Token() {
			e.t.Fatalf("b: Holder = %+v, %v, %v; want node-a at token %d", h, held, err, ta.Token())
		}
	}
	if err := ta.Release(ctx); err != nil {
		e.t.Fatalf("a: Release: %v", err)
	}
	tb, err := b.Lock(n).Acquire(ctx)
	switch {
	case err != nil:
		e.t.Fatalf("b: Acquire after the release: %v", err)
	case tb.Token() <= ta.Token():
		e.t.Fatalf("b's token %d, want more than a's %d", tb.Token(), ta.Token())
	case !tb.Valid():
		e.t.Fatal("b's fresh term is not valid")
	}
	if err := b.Close(ctx); err != nil {
		e.t.Fatalf("b: Close: %v", err)
	}
	if tb.Valid() {
		e.t.Fatal("b's term is still valid after its client closed")
	}
	ta2, err := a.Lock(n).Acquire(ctx)
	if err != nil || ta2.Token() <= tb.Token() {
		e.t.Fatalf("a: Acquire after b closed = %v (token above %d wanted), %v", ta2, tb.Token(), err)
	}
	_ = ta2.Close()
}

// testFencingKit runs the fencing test kit (core/fencingtest) against
// each of Harness.Fences, whose resources are closed by the kit when
// they are io.Closers. Skipped without them.
func testFencingKit(e *env) {
	if len(e.h.Fences) == 0 {
		e.t.Skip("the harness sets no Fences")
	}
	for _, f := range e.h.Fences {
		// fencingtest.Check rather than Run: no subtest may start inside
		// a synctest bubble.
		for _, fail := range fencingtest.Check(e.t.Context(), func(context.Context) (fencingtest.Resource, error) { return f.New(e.t), nil }) {
			e.t.Errorf("fence %s: %v", f.Name, fail)
		}
	}
}

// testStaleWriterRejected is R-FEN-1 end to end: client A holds a lock;
// its session ends on the store (Harness.Expire: as after a pause longer
// than the lease) while A does not know it yet; client B wins a newer
// term and writes through the fence; A's late write with its old token
// is refused and leaves B's value in place. Skipped without
// Harness.Fences and Harness.Expire.
func testStaleWriterRejected(e *env) {
	if len(e.h.Fences) == 0 || e.h.Expire == nil {
		e.t.Skip("the harness sets no Fences or no Expire")
	}
	a, b := e.client("node-a"), e.client("node-b")
	r := e.h.Fences[0].New(e.t)
	if c, ok := r.(io.Closer); ok {
		e.t.Cleanup(func() { _ = c.Close() })
	}
	ctx, cancel := e.ctx()
	defer cancel()
	write := func(token uint64, v string) bool {
		e.t.Helper()
		ok, err := r.Write(ctx, token, v)
		if err != nil {
			e.t.Fatalf("Write(%d, %q): %v", token, v, err)
		}
		return ok
	}
	n := e.name("ledger")
	ta, err := a.Lock(n).Acquire(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if !write(ta.Token(), "A: batch 1") {
		e.t.Fatal("A's first write was refused")
	}
	e.h.Expire(e.t, ta.Session())
	tb, err := b.Lock(n).Acquire(ctx)
	switch {
	case err != nil:
		e.t.Fatal(err)
	case tb.Token() <= ta.Token():
		e.t.Fatalf("B's token %d is not above A's %d", tb.Token(), ta.Token())
	case !write(tb.Token(), "B: batch 2"):
		e.t.Fatal("B's write was refused")
	case write(ta.Token(), "A: late batch"):
		e.t.Fatal("A's stale write was accepted")
	}
	if tok, v, err := r.State(ctx); err != nil || tok != tb.Token() || v != "B: batch 2" {
		e.t.Fatalf("the resource holds %d %q (%v), want B's write", tok, v, err)
	}
	_ = tb.Close()
}
