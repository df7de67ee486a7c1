package simbaredis

import (
	"context"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// TestEngineHandover runs two Simba clients on two Backends: a lock
// released by one is taken by the other at once through the release
// broadcast (R-CAND-2), long before the waiting candidate's next regular
// attempt (renewInterval/2 = 2.5s with the default 15s lease).
func TestEngineHandover(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	ctx := callCtx(t)
	newClient := func(identity string) (*simba.Client, *Backend) {
		b := openBackend(t, url, Options{KeyPrefix: prefix})
		c, err := simba.New(b, simba.WithIdentity(identity))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return c, b
	}
	a, _ := newClient("node-a")
	c, cb := newClient("node-c")

	held, err := a.Lock("report").Acquire(ctx)
	if err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	// The engine opened its session with its identity: the other client
	// sees who holds the lock.
	if h, ok, err := c.Holder(ctx, "report"); err != nil || !ok || h.Identity != "node-a" || h.Token != held.Token() || h.Since.IsZero() {
		t.Fatalf("Holder = %+v, %v, %v; want node-a at token %d since the acquire", h, ok, err, held.Token())
	}
	type result struct {
		term *simba.LockTerm
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	go func() {
		term, err := c.Lock("report").Acquire(ctx)
		got <- result{term, err, time.Now()}
	}()
	// Wait until the candidate lost its first attempt and watches.
	for deadline := time.Now().Add(10 * time.Second); cb.notify.count("report") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiting client never watched the lease")
		}
	}
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("second Acquire: %v", r.err)
	}
	defer func() {
		if err := r.term.Release(ctx); err != nil {
			t.Errorf("Release after handover: %v", err)
		}
	}()
	took := r.at.Sub(released)
	t.Logf("handover took %v", took)
	if took > time.Second {
		t.Fatalf("handover took %v, want well under the 2.5s retry period", took)
	}
	if r.term.Token() <= held.Token() {
		t.Fatalf("token %d after handover, want more than %d", r.term.Token(), held.Token())
	}
	if h, ok, err := a.Holder(ctx, "report"); err != nil || !ok || h.Identity != "node-c" || h.Token != r.term.Token() {
		t.Fatalf("Holder after handover = %+v, %v, %v; want node-c at token %d", h, ok, err, r.term.Token())
	}
}
