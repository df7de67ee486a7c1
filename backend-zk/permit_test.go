package simbazk

import (
	"errors"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// A slot whose session the server expires stops counting: once its node
// is gone, another number of permits is accepted and recorded, with a
// token above the expired slot's.
func TestPermitsOfAnExpiredSessionStopCounting(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	a, c := mustOpen(t, b, lease), mustOpen(t, b, lease)
	r, err := b.AcquirePermit(ctx(t), a, simba.Permit{Semaphore: "sem", Permits: 2, Slot: 1})
	if err != nil || !r.Won {
		t.Fatalf("AcquirePermit(2, slot 1) = %+v, %v, want won", r, err)
	}
	three := simba.Permit{Semaphore: "sem", Permits: 3, Slot: 0}
	if _, err := b.AcquirePermit(ctx(t), c, three); !errors.Is(err, simba.ErrPermitsMismatch) {
		t.Fatalf("AcquirePermit(3) while slot 1 of 2 is held = %v, want ErrPermitsMismatch", err)
	}
	for end := time.Now().Add(10 * lease); ; time.Sleep(lease / 4) { // a is not kept alive
		mustKeepAlive(t, b, c)
		got, err := b.AcquirePermit(ctx(t), c, three)
		if err == nil && got.Won {
			if got.Token <= r.Token {
				t.Fatalf("token %d after the expiry, want above %d", got.Token, r.Token)
			}
			return
		}
		if !errors.Is(err, simba.ErrPermitsMismatch) || time.Now().After(end) {
			t.Fatalf("AcquirePermit(3) after the holder stopped renewing = %+v, %v", got, err)
		}
	}
}
