package sqltest

import (
	"context"
	"errors"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// permit calls AcquirePermit for slot of the semaphore sem with n
// permits.
func permit(ctx context.Context, b Backend, s simba.SessionID, sem string, n, slot int) (simba.AcquireResult, error) {
	return b.(simba.PermitAcquirer).AcquirePermit(ctx, s, simba.Permit{Semaphore: sem, Permits: n, Slot: slot})
}

// testPermitCheckAfterLockWait: B's permit acquire waits for the
// semaphore's record, which a transaction holds; meanwhile H takes slot 0
// and commits. The check of B's permits, made once the record is locked,
// must see H's slot and refuse B's other number, whatever the isolation
// level of the connections: a check reading a snapshot from before the
// lock would find the semaphore free and let B in under another number.
func testPermitCheckAfterLockWait(t *testing.T, f *fixture) {
	b := f.backend()
	h, other := open(t, b, time.Minute), open(t, b, time.Minute)
	r, err := permit(ctxT(t), b, h, "sem", 2, 0)
	if err != nil || !r.Won {
		t.Fatalf("H's first permit: %+v, %v", r, err)
	}
	if err := b.Release(ctxT(t), h, "sem:0", r.Token); err != nil {
		t.Fatal(err)
	}
	commit := f.hold(t, "lock the semaphore's record", "UPDATE "+f.prefix+"semaphore SET token = token WHERE name = 'sem'")
	ctx := ctxRace(t)
	done := goCall(func() (simba.AcquireResult, error) { return permit(ctx, b, other, "sem", 3, 1) })
	if o := awaitWaitsOr(t, f, "B's permit acquire waiting for the record", 1, done); o != nil {
		t.Fatalf("B's permit acquire returned %+v, %v without waiting for the record", o.v, o.err)
	}
	if r := acquire(t, b, h, "sem:0"); !r.Won {
		t.Fatalf("H's acquire of slot 0: %+v", r)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if o := <-done; !errors.Is(o.err, simba.ErrPermitsMismatch) {
		t.Fatalf("B's permit acquire with 3 permits while H holds slot 0 of 2 = %+v, %v; want ErrPermitsMismatch", o.v, o.err)
	}
}

// testPermitCheckWaitsForRenewalInFlight: H holds slot 0 of 2 permits;
// its session looks expired, but a renewal of it is in flight. B's
// acquire with 3 permits must wait for the renewal and then find H live:
// refused. Judging the expiry read before the renewal would let B in.
func testPermitCheckWaitsForRenewalInFlight(t *testing.T, f *fixture) {
	b := f.backend()
	h, other := open(t, b, time.Minute), open(t, b, time.Minute)
	if r, err := permit(ctxT(t), b, h, "sem", 2, 0); err != nil || !r.Won {
		t.Fatalf("H's permit: %+v, %v", r, err)
	}
	f.expire(h)
	commit := f.hold(t, "renew H in a transaction", f.renewSQL(), string(h))
	ctx := ctxRace(t)
	done := goCall(func() (simba.AcquireResult, error) { return permit(ctx, b, other, "sem", 3, 1) })
	if o := awaitWaitsOr(t, f, "B's permit check waiting for H's renewal", 1, done); o != nil {
		t.Fatalf("B's permit acquire returned %+v, %v without waiting for H's renewal", o.v, o.err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if o := <-done; !errors.Is(o.err, simba.ErrPermitsMismatch) {
		t.Fatalf("B's permit acquire with 3 permits while renewed H holds slot 0 of 2 = %+v, %v; want ErrPermitsMismatch", o.v, o.err)
	}
}
