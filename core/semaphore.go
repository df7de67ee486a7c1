package simba

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// MaxPermits is the largest number of permits a semaphore may have.
const MaxPermits = 1024

// PermitName returns the lease name of slot i of the semaphore name: name,
// a colon and i in decimal ("jobs:0"). The permits of a semaphore are
// ordinary leases under these names, which snapshots, listings and
// Client.Holder show as such.
func PermitName(name string, i int) string { return name + ":" + strconv.Itoa(i) }

// ValidatePermit returns nil when p names a slot a semaphore may have:
// 1 to MaxPermits permits, a slot below them, and a semaphore name valid
// with the name of its last slot; else an error matching
// ErrInvalidArgument, or the *NameError of the name. Backends call it
// before any request.
func ValidatePermit(p Permit) error {
	switch {
	case p.Permits < 1 || p.Permits > MaxPermits:
		return fmt.Errorf("%w: %d permits, want 1 to %d", ErrInvalidArgument, p.Permits, MaxPermits)
	case p.Slot < 0 || p.Slot >= p.Permits:
		return fmt.Errorf("%w: slot %d of %d permits", ErrInvalidArgument, p.Slot, p.Permits)
	}
	if err := ValidateName(p.Semaphore); err != nil {
		return err
	}
	return ValidateName(PermitName(p.Semaphore, p.Permits-1))
}

// Semaphore hands out up to n permits of one name at once, across every
// client of the backend: each permit is a term, with a fencing token that
// strictly increases per semaphore name in the order the permits are
// granted, and a validity that ends before the backend could give the
// permit to someone else. At most n terms of the name are valid at once,
// as far as the local clocks can tell.
//
// Every holder must ask with the same n: while permits granted under one
// number are held, an acquire with another fails with ErrPermitsMismatch.
// Once none is held, the next acquire sets the number again, so a
// deployment can change it by stopping the old holders first.
//
// A permit is slot i of the semaphore, the lease PermitName(name, i); its
// LockTerm has that Name. A client may hold several permits of one
// semaphore, each from its own Acquire. A Semaphore value is cheap and
// safe for concurrent use. It needs a backend that implements
// PermitAcquirer (all of this repository).
type Semaphore struct {
	c       *Client
	name    string
	permits int
}

// Semaphore returns the semaphore name with permits permits. Both are
// checked by Acquire and TryAcquire.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	return &Semaphore{c: c, name: name, permits: permits}
}

// Name returns the name of the semaphore.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the number of permits the semaphore was made with.
func (s *Semaphore) Permits() int { return s.permits }

// slot returns the lock of permit i.
func (s *Semaphore) slot(i int) *Lock {
	return &Lock{c: s.c, name: PermitName(s.name, i), permit: &Permit{Semaphore: s.name, Permits: s.permits, Slot: i}}
}

func (s *Semaphore) check(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ValidatePermit(Permit{Semaphore: s.name, Permits: s.permits}); err != nil {
		return fmt.Errorf("simba: semaphore %q: %w", s.name, err)
	}
	if _, ok := s.c.b.(PermitAcquirer); !ok {
		return fmt.Errorf("simba: semaphore %s: %w", s.name, ErrNotSupported)
	}
	return nil
}

// TryAcquire makes one attempt at each permit, starting at a random one,
// and returns the first it wins. The whole call waits at most one lease
// duration or until ctx is done. When every permit is held it returns an
// error matching ErrLockHeld; otherwise its errors are those of
// Lock.TryAcquire, and ErrPermitsMismatch.
func (s *Semaphore) TryAcquire(ctx context.Context) (*LockTerm, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.LeaseDuration)
	defer cancel()
	return s.tryEach(ctx, rand.IntN(s.permits), s.permits)
}

// queued is how many permits one Acquire queues for at once.
const queued = 8

// Acquire waits for a permit until ctx is done, with the timeout, cancel
// and outage semantics of Lock.Acquire (R-LOCK-1, R-LOCK-2): the deadline
// of ctx is the timeout, a cancelled wait never leaves a permit held, and
// a deadline that passed before the call makes one TryAcquire.
//
// It tries up to 8 permits one by one, from a random one, as TryAcquire
// does. When they are held, it queues for every permit at once as a
// Lock.Acquire of each would, and
// takes the first it wins; it gives back at once any other won meanwhile.
// On the backends that queue waiters, a release thus wakes only the first
// waiter of the permit released: no thundering herd. A semaphore of more
// than 8 permits queues for 8 of them, drawn at random and drawn again
// every lease duration. It fails at once with an error matching
// ErrPermitsMismatch when the semaphore is in use with another number of
// permits.
func (s *Semaphore) Acquire(ctx context.Context) (*LockTerm, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		lt, err := s.TryAcquire(ctx)
		if errors.Is(err, ErrLockHeld) {
			return nil, fmt.Errorf("%w: %w: %w", ErrLockTimeout, err, ctx.Err())
		}
		return lt, err
	}
	// Uncontended, a permit costs one attempt: first try some one by one.
	lt, err := s.tryEach(ctx, rand.IntN(s.permits), queued)
	if err == nil || final(err) {
		return lt, err
	}
	for {
		round, cancel := context.WithCancel(ctx)
		if s.permits > queued {
			cancel()
			round, cancel = context.WithTimeout(ctx, s.c.cfg.LeaseDuration)
		}
		lt, err := s.queue(round, cancel)
		cancel()
		if err == nil || final(err) {
			return lt, err
		}
		if ctx.Err() != nil {
			if errors.Is(err, ErrLockTimeout) {
				return nil, fmt.Errorf("simba: semaphore %s: %w", s.name, err)
			}
			return nil, fmt.Errorf("%w: semaphore %s: %w", ErrLockTimeout, s.name, ctx.Err())
		}
	}
}

// queue waits for up to queued permits at once under ctx, and returns the
// first won or the error of the last wait to end. cancel cancels ctx.
func (s *Semaphore) queue(ctx context.Context, cancel context.CancelFunc) (*LockTerm, error) {
	slots := rand.Perm(s.permits)[:min(s.permits, queued)]
	done := make(chan waitResult, len(slots))
	for _, i := range slots {
		go func() {
			lt, err := s.slot(i).acquire(ctx, false)
			done <- waitResult{lt, err}
		}()
	}
	var won *LockTerm
	var last error
	for range slots {
		r := <-done
		switch {
		case r.err == nil && won == nil:
			won = r.lt
			cancel()
		case r.err == nil:
			r.lt.ReleaseAsync() // won beside the first: given back
		case final(r.err) && !final(last):
			last = r.err
			cancel()
		case last == nil:
			last = r.err
		}
	}
	if won != nil {
		return won, nil
	}
	return nil, last
}

// tryEach makes one attempt at each of k permits from start, under ctx.
func (s *Semaphore) tryEach(ctx context.Context, start, k int) (*LockTerm, error) {
	var last error
	held := 0
	k = min(k, s.permits)
	for i := 0; i < k && ctx.Err() == nil; i++ {
		lt, err := s.slot((start+i)%s.permits).acquire(ctx, true)
		switch {
		case err == nil || final(err):
			return lt, err
		case errors.Is(err, ErrLockHeld):
			held++
		default:
			last = err
		}
	}
	if held == k {
		return nil, fmt.Errorf("%w: semaphore %s: %d of its %d permits tried, all held", ErrLockHeld, s.name, k, s.permits)
	}
	if last == nil {
		last = fmt.Errorf("%w: semaphore %s: %w", ErrLockTimeout, s.name, ctx.Err())
	}
	return nil, last
}

// final reports whether an error of one permit's attempt ends the whole
// call: the other permits would give the same answer.
func final(err error) bool {
	var ne *NameError
	return errors.Is(err, ErrPermitsMismatch) || errors.Is(err, ErrClosed) || errors.Is(err, ErrClientNotStarted) ||
		errors.Is(err, ErrNameInUse) || errors.Is(err, ErrInvalidArgument) || errors.As(err, &ne)
}

// usePermit makes the entry of a lock serve permit p (nil: a plain lock),
// or says why it cannot: the entry is in use as a plain lock, or as a
// permit of another number. Call with the lock held.
func (e *entry) usePermit(p *Permit) error {
	if e.inUse() && (e.permit == nil) != (p == nil) {
		return fmt.Errorf("%w: %s is in use by this client both as a lock and as a permit", ErrNameInUse, e.name)
	}
	if e.inUse() && p != nil && e.permit.Permits != p.Permits {
		return fmt.Errorf("%w: semaphore %s is held by this client with %d permits, asked with %d",
			ErrPermitsMismatch, p.Semaphore, e.permit.Permits, p.Permits)
	}
	e.permit = p
	return nil
}

// failWaiters ends every queued Acquire and TryAcquire of the entry with
// err. Call with the lock held.
func (e *entry) failWaiters(err error) {
	for _, w := range e.waiters {
		w.deliver(waitResult{err: err})
	}
	clear(e.waiters)
	e.waiters = e.waiters[:0]
}

// acquireCall makes the backend call of an attempt: Acquire of the name, or
// AcquirePermit of the permit the entry served when the attempt started.
func (c *Client) acquireCall(a *attempt, name string) (AcquireResult, error) {
	if a.permit != nil {
		return c.b.(PermitAcquirer).AcquirePermit(&a.ctx, a.sess.id, *a.permit)
	}
	return c.b.Acquire(&a.ctx, a.sess.id, name)
}
