package simba_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// Any node sees who holds a lease: the session, the identity it was opened
// with, the token and since when; nobody once it is released.
func TestHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		a := newClient(t, s.Connect(), simba.WithIdentity("node-a"))
		b := newClient(t, s.Connect())
		ctx := context.Background()
		if _, ok, err := b.Holder(ctx, "job"); ok || err != nil {
			t.Fatalf("Holder of a free lease: ok=%v err=%v", ok, err)
		}
		won := time.Now()
		term, err := a.Lock("job").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h, ok, err := b.Holder(ctx, "job")
		want := simba.Holder{Session: term.Session(), Identity: "node-a", Token: term.Token(), Since: won}
		if err != nil || !ok || h != want {
			t.Fatalf("Holder = %+v, %v, %v; want %+v", h, ok, err, want)
		}
		_ = term.Close()
		if _, ok, _ := b.Holder(ctx, "job"); ok {
			t.Fatal("holder still reported after the release")
		}
		if _, _, err := b.Holder(ctx, "bad/name"); !errors.Is(err, simba.ErrInvalidName) {
			t.Fatalf("Holder(bad/name) = %v", err)
		}
		if got := b.Identity(); !strings.Contains(got, ":") {
			t.Fatalf("default identity %q, want host:pid", got)
		}
		if got := a.Snapshot().Session.Identity; got != "node-a" {
			t.Fatalf("snapshot identity %q", got)
		}
	})
}

// A backend without the capability gives ErrNotSupported.
func TestHolderNotSupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, struct{ simba.Backend }{memory.New().Connect()})
		if _, _, err := c.Holder(context.Background(), "job"); !errors.Is(err, simba.ErrNotSupported) {
			t.Fatalf("Holder = %v, want ErrNotSupported", err)
		}
		if err := c.ObserveHolder(context.Background(), "job", func(simba.Holder, bool) {}); !errors.Is(err, simba.ErrNotSupported) {
			t.Fatalf("ObserveHolder = %v, want ErrNotSupported", err)
		}
	})
}

// WithIdentity refuses what cannot be shown on a line.
func TestWithIdentity(t *testing.T) {
	for _, give := range []string{"", "a\nb", "\xff", strings.Repeat("x", simba.MaxIdentity+1)} {
		if _, err := simba.New(memory.New(), simba.WithIdentity(give)); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("WithIdentity(%q) = %v, want ErrInvalidArgument", give, err)
		}
	}
	c, err := simba.New(memory.New(), simba.WithIdentity("billing-7 (eu-west)"))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close(context.Background())
}

// ObserveHolder reports the holder now and at every change: a release at
// once (the memory backend broadcasts releases), a new holder within one
// renew interval.
func TestObserveHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		a := newClient(t, s.Connect(), simba.WithIdentity("a"))
		b := newClient(t, s.Connect(), simba.WithIdentity("b"))
		type seen struct {
			who string
			at  time.Duration
		}
		var mu sync.Mutex
		var got []seen
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- b.ObserveHolder(ctx, "job", func(h simba.Holder, ok bool) {
				mu.Lock()
				defer mu.Unlock()
				who := "nobody"
				if ok {
					who = h.Identity
				}
				got = append(got, seen{who, time.Since(start)})
			})
		}()
		time.Sleep(100 * time.Millisecond)
		term, err := a.Lock("job").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		_ = term.Close()
		time.Sleep(100 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("ObserveHolder returned %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 3 || got[0].who != "nobody" || got[1].who != "a" || got[2].who != "nobody" {
			t.Fatalf("observed %v, want nobody, a, nobody", got)
		}
		if got[1].at > 100*time.Millisecond+time.Second {
			t.Fatalf("the new holder was seen after %v, more than one renew interval", got[1].at)
		}
		if got[2].at != 2100*time.Millisecond {
			t.Fatalf("the release was seen at %v, want at once (2.1s)", got[2].at)
		}
	})
}

// Several event listeners each get every event, in order; a keep-alive
// reports its round trip, and a lock's Elected how long the winning call
// waited.
func TestEventListenersAndEventDurations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		var mu sync.Mutex
		var first, second []simba.Event
		record := func(to *[]simba.Event) func(context.Context, simba.Event) {
			return func(_ context.Context, e simba.Event) {
				mu.Lock()
				*to = append(*to, e)
				mu.Unlock()
			}
		}
		a := newClient(t, s.Connect())
		held, err := a.Lock("job").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b := newClient(t, s.Connect(), simba.WithEventListener(record(&first)),
			simba.WithEventListener(func(context.Context, simba.Event) { panic("a broken listener") }),
			simba.WithEventListener(record(&second)))
		go func() {
			time.Sleep(1500 * time.Millisecond)
			_ = held.Close()
		}()
		term, err := b.Lock("job").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = term.Close()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(first) == 0 || len(first) != len(second) {
			t.Fatalf("listeners got %d and %d events", len(first), len(second))
		}
		var keepAlives int
		var waited time.Duration
		for i, e := range first {
			if e.Kind != second[i].Kind || e.Time != second[i].Time {
				t.Fatalf("event %d: %v and %v", i, e, second[i])
			}
			switch e.Kind {
			case simba.EventKeepAlive:
				keepAlives++
				if e.Err != nil || e.Latency != 0 { // the memory backend answers at once in fake time
					t.Fatalf("keep-alive event %v", e)
				}
			case simba.EventElected:
				waited = e.Waited
			}
		}
		if keepAlives == 0 {
			t.Fatal("no KeepAlive event in 1.5s with a 1s renew interval")
		}
		if waited != 1500*time.Millisecond {
			t.Fatalf("Elected.Waited %v, want the 1.5s the Acquire waited", waited)
		}
	})
}
