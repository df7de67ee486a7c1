package backendtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/goleak"

	simba "github.com/simba-go/simba/core"
)

// calls returns every call of the SPI and of the optional interfaces b
// implements, for session s and lease name n, each returning its error.
func calls(b simba.Backend, s simba.SessionID, n string) map[string]func(context.Context) error {
	m := map[string]func(context.Context) error{
		"OpenSession": func(ctx context.Context) error { return second(b.OpenSession(ctx, time.Second)) },
		"KeepAlive": func(ctx context.Context) error {
			return second(b.KeepAlive(ctx, s, simba.KeepAliveRequest{Lease: time.Second}))
		},
		"Acquire":      func(ctx context.Context) error { return second(b.Acquire(ctx, s, n)) },
		"Release":      func(ctx context.Context) error { return b.Release(ctx, s, n, 1) },
		"JoinGroup":    func(ctx context.Context) error { return second(b.JoinGroup(ctx, s, n)) },
		"LeaveGroup":   func(ctx context.Context) error { return b.LeaveGroup(ctx, s, n) },
		"CloseSession": func(ctx context.Context) error { return b.CloseSession(ctx, s) },
	}
	if o, ok := b.(simba.IdentityOpener); ok {
		m["OpenSessionAs"] = func(ctx context.Context) error { return second(o.OpenSessionAs(ctx, time.Second, "me")) }
	}
	if r, ok := b.(simba.HolderReader); ok {
		m["Holder"] = func(ctx context.Context) error { _, _, err := r.Holder(ctx, n); return err }
	}
	if l, ok := b.(simba.HolderLister); ok {
		m["ListHolders"] = func(ctx context.Context) error { return second(l.ListHolders(ctx, simba.ListQuery{Limit: 10})) }
	}
	if w, ok := b.(simba.Sweeper); ok {
		m["Sweep"] = func(ctx context.Context) error { return second(w.Sweep(ctx, time.Hour)) }
	}
	if w, ok := b.(simba.ReleaseNotifier); ok {
		m["WatchRelease"] = func(ctx context.Context) error { return second(w.WatchRelease(ctx, n)) }
	}
	return m
}

// inOrder returns the names of calls in name order, CloseSession last: a
// backend may forget a session it was asked to close, even if the call
// failed.
func inOrder(calls map[string]func(context.Context) error) []string {
	ops := slices.Sorted(maps.Keys(calls))
	if i := slices.Index(ops, "CloseSession"); i >= 0 {
		ops = append(slices.Delete(ops, i, i+1), "CloseSession")
	}
	return ops
}

func second[T any](_ T, err error) error { return err }

// testClosedBackend: Close is idempotent; after it every call fails with
// an error matching Harness.ErrClosed, a release watch made before it
// fires, and every goroutine the backend started has ended. Skipped
// without Harness.ErrClosed or for a backend that is no io.Closer.
func testClosedBackend(e *env) {
	if e.h.ErrClosed == nil {
		e.t.Skip("the harness sets no ErrClosed")
	}
	before := goleak.IgnoreCurrent()
	b := e.node()
	c, ok := b.(io.Closer)
	if !ok {
		e.t.Skip("the backend is no io.Closer")
	}
	s := e.open(b)
	n := e.name("n")
	s.win(n)
	watch := e.watchHeld(b, n)
	e.closing(b)
	for i := range 2 {
		if err := c.Close(); err != nil {
			e.t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	e.wantFired(watch, "Close")
	ctx, cancel := e.ctx()
	defer cancel()
	for op, call := range calls(b, s.id, n) {
		if err := call(ctx); !errors.Is(err, e.h.ErrClosed) {
			e.t.Errorf("%s after Close = %v, want an error matching %v", op, err, e.h.ErrClosed)
		}
	}
	if err := goleak.Find(before); err != nil {
		e.t.Errorf("goroutines left after Close: %v", err)
	}
}

// testCancelledContext: a call whose context has ended fails with an
// error matching the context's error, and the backend goes on working.
func testCancelledContext(e *env) {
	b := e.node()
	s := e.open(b)
	n := e.name("n")
	ctx, cancel := context.WithCancel(e.t.Context())
	cancel()
	for op, call := range calls(b, s.id, n) {
		if op == "CloseSession" {
			continue // the session is used below
		}
		if err := call(ctx); !errors.Is(err, context.Canceled) {
			e.t.Errorf("%s with a cancelled context = %v, want an error matching context.Canceled", op, err)
		}
	}
	tok := s.win(n)
	s.wantLeases(s.keepAlive(), map[string]uint64{n: tok}, "the backend works after cancelled calls")
}

// testUnknownSessions: a session id the backend never granted, well
// formed or not, is an expired session: keep-alive, acquire and join
// fail with simba.ErrSessionExpired, and close, release and leave are
// no-ops (nil). A lease of zero or less is refused.
func testUnknownSessions(e *env) {
	b := e.node()
	ctx, cancel := e.ctx()
	defer cancel()
	granted := e.open(b).id // its shape, with other digits
	other := []byte(granted)
	for i, c := range other {
		if c >= '0' && c <= '9' {
			other[i] = '0' + (c-'0'+1)%10
		}
	}
	n := e.name("n")
	for _, id := range []simba.SessionID{"", "nope", "0000000000000001", simba.SessionID(other),
		simba.SessionID(strings.ToUpper(string(other))), simba.SessionID(strings.Repeat("0", 33)), "x'; DROP TABLE t; --"} {
		if id == granted {
			continue
		}
		if r, err := b.KeepAlive(ctx, id, simba.KeepAliveRequest{Lease: time.Second}); !errors.Is(err, simba.ErrSessionExpired) {
			e.t.Errorf("KeepAlive(%q) = (%+v, %v), want an error matching simba.ErrSessionExpired", id, r, err)
		}
		if r, err := b.Acquire(ctx, id, n); !errors.Is(err, simba.ErrSessionExpired) {
			e.t.Errorf("Acquire(%q) = (%+v, %v), want an error matching simba.ErrSessionExpired", id, r, err)
		}
		if m, err := b.JoinGroup(ctx, id, n); !errors.Is(err, simba.ErrSessionExpired) {
			e.t.Errorf("JoinGroup(%q) = (%d, %v), want an error matching simba.ErrSessionExpired", id, m, err)
		}
		for op, err := range map[string]error{
			"Release": b.Release(ctx, id, n, 1), "LeaveGroup": b.LeaveGroup(ctx, id, n), "CloseSession": b.CloseSession(ctx, id),
		} {
			if err != nil {
				e.t.Errorf("%s(%q) = %v, want a no-op", op, id, err)
			}
		}
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if g, err := b.OpenSession(ctx, d); err == nil {
			_ = b.CloseSession(ctx, g.ID)
			e.t.Errorf("OpenSession(%v) = %+v, want an error", d, g)
		}
	}
}

// testInvalidNames: a name simba.ValidateName refuses is refused by
// every call that takes one with a *simba.NameError, before it reaches
// the store.
func testInvalidNames(e *env) {
	b := e.node()
	s := e.open(b)
	ctx, cancel := e.ctx()
	defer cancel()
	for _, bad := range []string{"", ".", "..", "a b", "é", "a/b", "x'; DROP TABLE t; --", "a\x00b", strings.Repeat("a", simba.MaxNameLength+1)} {
		if simba.ValidateName(bad) == nil {
			e.t.Fatalf("suite bug: %q is a valid name", bad)
		}
		errs := map[string]error{
			"Acquire":    second(b.Acquire(ctx, s.id, bad)),
			"Release":    b.Release(ctx, s.id, bad, 1),
			"JoinGroup":  second(b.JoinGroup(ctx, s.id, bad)),
			"LeaveGroup": b.LeaveGroup(ctx, s.id, bad),
		}
		if r, ok := b.(simba.HolderReader); ok {
			_, _, errs["Holder"] = r.Holder(ctx, bad)
		}
		for op, err := range errs {
			var ne *simba.NameError
			if !errors.As(err, &ne) {
				e.t.Errorf("%s(%q) = %v, want a *simba.NameError", op, bad, err)
			}
		}
	}
	s.wantLeases(s.keepAlive(), nil, "no invalid name was taken")
}

// testConcurrentCalls: acquires and releases of one session run at once,
// beside its keep-alives, as a client taking many leases in parallel
// does: none fails (a deadlock between the session's own statements
// surfaces as an error), and the keep-alive then lists what is held.
func testConcurrentCalls(e *env) {
	b := e.node()
	s := e.openLong(b)
	const workers, each = 8, 20
	ctx, cancel := e.ctx()
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.KeepAlive(ctx, s.id, simba.KeepAliveRequest{Lease: s.lease}); err != nil {
				errs <- fmt.Errorf("KeepAlive: %w", err)
				return
			}
			time.Sleep(time.Millisecond) // lets the clock of a synctest bubble move
		}
	})
	want := make([]map[string]uint64, workers)
	var work sync.WaitGroup
	for w := range workers {
		want[w] = map[string]uint64{}
		work.Go(func() {
			for i := range each {
				name := e.name(fmt.Sprintf("w%d-%d", w, i%(each/2)))
				r, err := b.Acquire(ctx, s.id, name)
				if err != nil || !r.Won {
					errs <- fmt.Errorf("Acquire(%q) = %+v, %w", name, r, err)
					return
				}
				want[w][name] = r.Token
				if i < each/2 {
					continue // the first half is kept, then taken again and released
				}
				if err := b.Release(ctx, s.id, name, r.Token); err != nil {
					errs <- fmt.Errorf("Release(%q): %w", name, err)
					return
				}
				delete(want[w], name)
			}
		})
	}
	work.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Error(err)
	}
	if !e.t.Failed() {
		// The workers called the backend directly: mark their names
		// touched, so that the keep-alive asks about each of them.
		held := map[string]uint64{}
		for w := range workers {
			for i := range each / 2 {
				s.touched[e.name(fmt.Sprintf("w%d-%d", w, i))] = true
			}
			maps.Copy(held, want[w])
		}
		s.wantLeases(s.keepAlive(), held, "every lease taken was released")
	}
}
