package backendtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
)

// testSweep: a sweep removes the state of a name nobody holds, released
// or left by an owner whose session ended (Harness.Stored shows it gone),
// and keeps tokens strictly increasing (R-TERM-2): the next term of a
// swept name gets a token above every earlier one. A held name survives
// the sweep with its term. Skipped for backends that are not
// simba.Sweeper.
func testSweep(e *env) {
	b := e.node()
	sw, ok := b.(simba.Sweeper)
	if !ok {
		e.t.Skip("the backend does not implement simba.Sweeper")
	}
	const idle = time.Second // the lowest idle every backend accepts
	a := e.open(b)
	gone, kept := e.name("gone"), e.name("kept")
	var last uint64
	for i := range 3 {
		last = a.winAbove(gone, last, fmt.Sprintf("in round %d", i))
		a.release(gone, last)
	}
	held := a.win(kept)
	// A name whose owner's session ended without a release: by expiry
	// when the harness can expire it, else by a close.
	orphan := e.name("orphan")
	o := e.open(b)
	otok := o.win(orphan)
	if e.h.Expire != nil {
		e.h.Expire(e.t, o.id)
	} else {
		o.close()
	}
	e.idle(a, idle+idle/4, gone, kept, orphan)

	ctx, cancel := e.ctx()
	defer cancel()
	n, err := sw.Sweep(ctx, idle)
	switch {
	case err != nil:
		e.t.Fatalf("Sweep(%v): %v", idle, err)
	case n < 2:
		e.t.Fatalf("Sweep(%v) removed %d names, want at least %q and %q, free and idle for %v", idle, n, gone, orphan, idle+idle/4)
	}
	if e.h.Stored != nil {
		for name, want := range map[string]bool{gone: false, orphan: false, kept: true} {
			if got := e.h.Stored(e.t, name); got != want {
				e.t.Errorf("after a sweep the store keeps state of %q: %v, want %v", name, got, want)
			}
		}
	}
	a.wantLeases(a.keepAlive(), map[string]uint64{kept: held}, "a held lease survives a sweep")
	e.open(e.node()).lose(kept, "its holder is live after a sweep")
	a.winAbove(gone, last, "after its state was swept")
	a.winAbove(orphan, otok, "after the state of its expired owner's term was swept")

	if n, err := sw.Sweep(ctx, 0); err == nil || !errors.Is(err, simba.ErrInvalidArgument) {
		e.t.Fatalf("Sweep(0) = %d, %v; want an error matching simba.ErrInvalidArgument", n, err)
	}
}

// idle makes the last terms of names begin d ago or more: by Harness.Age
// if set, or else by waiting d, s kept alive meanwhile.
func (e *env) idle(s *session, d time.Duration, names ...string) {
	e.t.Helper()
	if e.h.Age != nil {
		for _, n := range names {
			e.h.Age(e.t, n, d)
		}
		return
	}
	for waited := time.Duration(0); waited < d; waited += e.h.Lease / 4 {
		s.keepAlive()
		time.Sleep(e.h.Lease / 4)
	}
	s.keepAlive()
}

// outcome is what a call started by async returned.
type outcome[T any] struct {
	v   T
	err error
}

// async runs f in a goroutine of its own; its outcome arrives on the
// channel returned.
func async[T any](f func() (T, error)) <-chan outcome[T] {
	ch := make(chan outcome[T], 1)
	go func() {
		v, err := f()
		ch <- outcome[T]{v, err}
	}()
	return ch
}

// waitShown bounds how long Harness.Waiting may take to show a call
// waiting (MariaDB refreshes its view of lock waits only once nobody read
// it for 100ms, which other clients can put off).
const waitShown = 30 * time.Second

// awaitWaiting waits until Harness.Waiting reports n calls waiting, or
// n-1 once the call of ch returned without waiting, whose outcome it then
// returns (nil while that call waits).
func awaitWaiting[T any](e *env, what string, n int, ch <-chan outcome[T]) *outcome[T] {
	e.t.Helper()
	var got *outcome[T]
	deadline := time.Now().Add(waitShown)
	for {
		if got == nil {
			select {
			case o := <-ch:
				got = &o
			default:
			}
		}
		want := n
		if got != nil {
			want--
		}
		if e.h.Waiting(e.t) >= want {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s (%d calls waiting) within %v", what, want, waitShown)
		}
		// Not more often: MySQL and MariaDB refresh what they show of
		// lock waits only when nobody asked for 100ms.
		time.Sleep(200 * time.Millisecond)
	}
}

// testSweepRace: a name taken and given back, then an acquire of it and a
// sweep that both wait for what another client holds (the floor, or the
// name's own state), the sweep begun more than idle after the acquire.
// Once let go, in whatever order they run, the acquire wins above the
// name's last token and keeps its term: the sweep must not remove the
// state of a name just won, which would let another session win it too.
// Skipped unless the backend is a simba.Sweeper and Harness.Hold and
// Harness.Waiting are set.
func testSweepRace(e *env) {
	b := e.node()
	sw, ok := b.(simba.Sweeper)
	if !ok || e.h.Hold == nil || e.h.Waiting == nil {
		e.t.Skip("the backend does not implement simba.Sweeper, or the harness sets no Hold and Waiting")
	}
	const idle = time.Second
	for i, held := range []string{"", "name"} {
		first := e.open(b)
		n := e.name(fmt.Sprintf("race%d", i))
		prev := first.win(n)
		first.release(n, prev)
		e.idle(first, idle+idle/4, n)
		a := e.openLong(e.node())
		what := "the floor"
		if held != "" {
			held, what = n, "the name"
		}
		release := e.h.Hold(e.t, held)

		// Calls that outlive the waits for them to show.
		ctx, cancel := context.WithTimeout(e.t.Context(), 3*waitShown)
		begun := time.Now()
		a.touched[n] = true
		won := async(func() (simba.AcquireResult, error) { return a.b.Acquire(ctx, a.id, n) })
		early := awaitWaiting(e, "acquire waiting for "+what, 1, won)
		// An acquire that dates its term from when it began makes the
		// term look idle to a sweep that begins idle later.
		time.Sleep(time.Until(begun.Add(idle + idle/10)))
		swept := async(func() (int, error) { return sw.Sweep(ctx, idle) })
		waits := 2
		if early != nil {
			waits = 1
		}
		if o := awaitWaiting(e, "sweep waiting for "+what, waits, swept); o != nil {
			swept = func() <-chan outcome[int] { ch := make(chan outcome[int], 1); ch <- *o; return ch }()
		}
		release()
		res := early
		if res == nil {
			o := <-won
			res = &o
		}
		o := <-swept
		cancel()
		switch {
		case res.err != nil:
			e.t.Fatalf("Acquire(%s, %q) behind %s held elsewhere: %v", a.id, n, what, res.err)
		case !res.v.Won || res.v.Token <= prev:
			e.t.Fatalf("Acquire(%s, %q) behind %s held elsewhere = %+v, want a win above the last term's %d", a.id, n, what, res.v, prev)
		case o.err != nil:
			e.t.Fatalf("Sweep(%v) behind %s held elsewhere: %v", idle, what, o.err)
		}
		a.wantLeases(a.keepAlive(), map[string]uint64{n: res.v.Token}, "a term won while a sweep waited survives it")
		c := e.open(e.node())
		c.lose(n, "its holder won it while a sweep waited, and is live")
		a.release(n, res.v.Token)
		c.winAbove(n, res.v.Token, "after its holder gave it back")
	}
}
