package simba

import (
	"context"
	"fmt"
)

// Lock holds a lease around a step: an election of the name that takes
// its first term and gives it back on Release. Within one client a name
// has at most one holder (R-LOCK-5). A Lock value is cheap and safe for
// concurrent use; Locks of one name on one client share their state.
type Lock struct {
	c    *Client
	name string
}

// Lock returns the lock of name. The name is checked by Acquire.
func (c *Client) Lock(name string) *Lock { return &Lock{c: c, name: name} }

// Name returns the lease name of the lock.
func (l *Lock) Name() string { return l.name }

// LockTerm is a term won by a lock; it also releases the lease. It is not
// bound to a goroutine: hand it to another and release it there (R-LOCK-6).
type LockTerm struct {
	*Term
	e *entry
}

type waiter struct {
	done chan waitResult // buffered: the engine never blocks on it
	try  bool
}

type waitResult struct {
	lt  *LockTerm
	err error
}

// Acquire waits for a term of the lock until ctx is done. The deadline of
// ctx is the timeout: when it passes first, Acquire returns an error
// matching both ErrLockTimeout and context.DeadlineExceeded. A term that
// ends right after it was won does not end the wait: the lock contends
// again (R-LOCK-1). Cancelling ctx abandons the attempt and releases a term
// it already won, so a cancelled acquisition never leaves the lock held
// (R-LOCK-2). A second Acquire of a name this client holds waits for the
// first to be released (R-LOCK-5).
func (l *Lock) Acquire(ctx context.Context) (*LockTerm, error) {
	return l.acquire(ctx, false)
}

// TryAcquire makes one attempt. It returns the term when this client wins
// the first answered attempt, an error matching ErrLockHeld when another
// session or this client holds the lease, and ErrLockTimeout when no
// attempt is answered within one lease duration or before ctx is done
// (R-LOCK-3).
func (l *Lock) TryAcquire(ctx context.Context) (*LockTerm, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	ctx, cancel := context.WithTimeout(ctx, l.c.cfg.LeaseDuration)
	defer cancel()
	return l.acquire(ctx, true)
}

func (l *Lock) acquire(ctx context.Context, try bool) (*LockTerm, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ValidateName(l.name); err != nil {
		return nil, err
	}
	c := l.c
	for {
		if ctx.Err() != nil {
			return nil, l.timeout(ctx)
		}
		c.lock()
		e, err := c.entryFor(l.name, kindLock)
		if err != nil {
			c.unlock()
			return nil, err
		}
		if try && (e.holder != nil || len(e.waiters) > 0) {
			c.unlock()
			return nil, fmt.Errorf("%w: %s is held by this client", ErrLockHeld, l.name)
		}
		w := &waiter{done: make(chan waitResult, 1), try: try}
		e.waiters = append(e.waiters, w)
		// The only waiter makes the attempt on its own goroutine: no
		// goroutine start and no wake-up on the uncontended path. The call
		// ends with the client or the caller's ctx, whichever ends first.
		call := e.startAttempt()
		c.unlock()
		if call != nil {
			actx, cancel := context.WithCancel(c.loopCtx)
			stop := context.AfterFunc(ctx, cancel)
			call(actx)
			stop()
			cancel()
		}

		select {
		case r := <-w.done:
			if r.err != nil {
				return nil, r.err
			}
			if ctx.Err() != nil {
				// Cancelled while the term arrived: the caller gave up, so
				// the term is released, never returned (R-LOCK-2).
				c.lock()
				if rel := r.lt.releaseLocked(); rel != nil {
					c.goBackground(func(ctx context.Context) { _ = rel(ctx) })
				}
				e.forget()
				c.unlock()
				return nil, l.timeout(ctx)
			}
			if r.lt.Valid() {
				return r.lt, nil
			}
			if try {
				return nil, fmt.Errorf("%w: %s: the term won ended at once", ErrLockHeld, l.name)
			}
			// The term ended right after it was won: wait for the next.
		case <-ctx.Done():
			c.lock()
			if !e.dropWaiter(w) {
				if r := <-w.done; r.lt != nil {
					if rel := r.lt.releaseLocked(); rel != nil {
						c.goBackground(func(ctx context.Context) { _ = rel(ctx) })
					}
				}
			}
			if len(e.waiters) == 0 && e.holder == nil {
				e.abandon()
				e.forget()
			}
			c.unlock()
			return nil, l.timeout(ctx)
		}
	}
}

func (l *Lock) timeout(ctx context.Context) error {
	return fmt.Errorf("%w: %s: %w", ErrLockTimeout, l.name, ctx.Err())
}

// dropWaiter removes w from the queue and reports whether it was there
// (false: a result was already sent to it).
func (e *entry) dropWaiter(w *waiter) bool {
	for i, x := range e.waiters {
		if x == w {
			e.waiters = append(e.waiters[:i], e.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// lockWon hands a new term to the first waiter. Call with the lock held.
func (e *entry) lockWon(t *Term) {
	w := e.waiters[0]
	e.waiters = e.waiters[1:]
	lt := &LockTerm{Term: t, e: e}
	e.holder = lt
	w.done <- waitResult{lt: lt}
}

// refuseTry answers a TryAcquire at the head of the queue whose attempt
// found the lease held.
func (e *entry) refuseTry() {
	if len(e.waiters) > 0 && e.waiters[0].try {
		w := e.waiters[0]
		e.waiters = e.waiters[1:]
		w.done <- waitResult{err: fmt.Errorf("%w: %s", ErrLockHeld, e.name)}
	}
}

// lockLost clears the holder of a term lost early: the lock is released
// for good, never re-acquired behind the holder's back (R-LOCK-7).
func (e *entry) lockLost(t *Term) {
	if e.holder != nil && e.holder.Term == t {
		e.holder = nil
	}
}

// Release revokes the term (Stopped) and releases the lease, waiting for
// the backend's answer bounded by ctx and the renew period. It is
// idempotent: releasing an ended or already released term is a no-op that
// returns nil at once (R-LOCK-6). The error, if any, is the backend's; the
// term has ended either way, and the lease is freed by the next keep-alive
// or the session's expiry.
func (lt *LockTerm) Release(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c := lt.e.c
	c.lock()
	rel := lt.releaseLocked()
	c.unlock()
	if rel == nil {
		return nil
	}
	err := rel(ctx)
	c.lock()
	lt.e.forget()
	c.unlock()
	return err
}

// Close releases the term like Release with no deadline of its own, so a
// LockTerm works with defer and io.Closer.
func (lt *LockTerm) Close() error { return lt.Release(context.Background()) }

// releaseLocked ends the term if it still holds the lock and returns the
// backend call to make, or nil. Call with the lock held.
func (lt *LockTerm) releaseLocked() func(context.Context) error {
	e := lt.e
	if e.holder != lt {
		return nil
	}
	e.holder = nil
	if e.term == lt.Term {
		e.term = nil
	}
	if !lt.revoke(Stopped) {
		return nil
	}
	e.c.emit(Event{Kind: EventRevoked, Session: lt.session, Name: e.name, Token: lt.token, Reason: Stopped})
	rel := e.releaseNow(lt.Term)
	e.contend()
	return rel
}
