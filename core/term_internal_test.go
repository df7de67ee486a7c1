package simba

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A renewal that checked the deadline before a reader saw it passed cannot
// move it afterwards: the reader seals the clock, and the renewal's
// compare-and-swap fails (R-DL-3, R-TERM-4).
func TestSealedClockRefusesARenewalThatCheckedBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newSessionClock()
		c.start(time.Now().Add(time.Second))
		checked := c.deadline.Load() // a renewal checks the deadline here...
		time.Sleep(2 * time.Second)
		if r := c.remaining(); r != 0 { // ...a reader sees it passed...
			t.Fatalf("remaining %v after the deadline", r)
		}
		// ...and the renewal's swap, from the value it checked, fails.
		if c.deadline.CompareAndSwap(checked, int64(time.Hour)) {
			t.Fatal("a renewal moved a deadline a reader had seen passed")
		}
		if c.extend(time.Now().Add(time.Hour)) || c.remaining() != 0 {
			t.Fatal("a sealed clock was extended")
		}
		if !c.deadlineTime().Before(time.Now()) {
			t.Fatal("a sealed clock's deadline is not in the past")
		}
	})
}

// A grant beyond any sane lease does not overflow the local validity.
func TestLocalValidityClamped(t *testing.T) {
	cfg := Config{NoDrift: true}.withDefaults()
	if v := cfg.localValidity(time.Duration(1<<63 - 1)); v <= 0 {
		t.Fatalf("local validity %v of a huge grant", v)
	}
}

// The term's context is made when first asked for: asked before the
// revoke, it ends with it; asked after, it is born ended; either way its
// cause names the reason.
func TestTermContextMadeOnDemand(t *testing.T) {
	clock := newSessionClock()
	clock.start(time.Now().Add(time.Hour))
	before := newTerm("n", 1, "s", clock)
	done := before.Done()
	before.revoke(TakenOver)
	<-done
	after := newTerm("n", 2, "s", clock)
	after.revoke(SteppedDown)
	for _, c := range []struct {
		term *Term
		want RevokeReason
	}{{before, TakenOver}, {after, SteppedDown}} {
		ctx := c.term.Context()
		if ctx.Err() == nil {
			t.Fatalf("token %d: context not ended after the revoke", c.term.Token())
		}
		cause := context.Cause(ctx)
		if !errors.Is(cause, ErrTermExpired) || !strings.Contains(cause.Error(), c.want.String()) {
			t.Fatalf("token %d: cause %v, want ErrTermExpired naming %s", c.term.Token(), cause, c.want)
		}
	}
}
