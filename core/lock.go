package simba

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Lock holds a lease around a step: an election of the name that takes
// its first term and gives it back on Release. Within one client a name
// has at most one holder (R-LOCK-5). A Lock value is cheap and safe for
// concurrent use; Locks of one name on one client share their state.
type Lock struct {
	c      *Client
	name   string
	permit *Permit     // the semaphore slot the lock is, or nil
	valid  atomic.Bool // name was found valid: the name never changes
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

// Acquire waits for a term of the lock until ctx is done. The deadline of
// ctx is the timeout: when it passes first, Acquire returns an error
// matching both ErrLockTimeout and context.DeadlineExceeded. A term that
// ends right after it was won does not end the wait: the lock contends
// again (R-LOCK-1). Cancelling ctx abandons the attempt and releases a term
// it already won, so a cancelled acquisition never leaves the lock held
// (R-LOCK-2); the error then matches ErrLockTimeout and context.Canceled. A
// second Acquire of a name this client holds waits for the first to be
// released (R-LOCK-5).
//
// A deadline that has passed before the call, a timeout of zero, makes one
// attempt as TryAcquire does, waiting for its answer at most one lease
// duration: the term when the lock is won, else the timeout error (which
// then also matches ErrLockHeld when the lease is held). A ctx cancelled
// before the call makes no attempt.
//
// An outage is not contention: when the deadline passes while the client
// has no live session (none could be opened, or its last keep-alive
// failed), or after every attempt made during the wait failed with a
// backend error, the error matches ErrBackendUnavailable as well as
// ErrLockTimeout and context.DeadlineExceeded. A wait behind a term this
// client holds, or one in which the backend answered that another session
// holds the lease and the session is still live, times out with
// ErrLockTimeout alone.
func (l *Lock) Acquire(ctx context.Context) (*LockTerm, error) {
	if ctx != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return l.acquireOnce(ctx)
	}
	return l.acquire(ctx, false)
}

// acquireOnce is Acquire with a deadline already passed: one attempt, as
// TryAcquire, whose failure is the timeout of ctx (R-LOCK-1, R-LOCK-3).
func (l *Lock) acquireOnce(ctx context.Context) (*LockTerm, error) {
	lt, err := l.TryAcquire(ctx)
	switch {
	case err == nil:
		return lt, nil
	case errors.Is(err, ErrLockTimeout):
		return nil, err // the attempt's own bound passed: it matches DeadlineExceeded
	case errors.Is(err, ErrLockHeld):
		return nil, fmt.Errorf("%w: %w: %w", ErrLockTimeout, err, ctx.Err())
	}
	return nil, err
}

// TryAcquire makes one attempt, waiting for its answer at most one lease
// duration or until ctx is done (R-LOCK-3). It returns:
//
//   - the term, when this client wins the first answered attempt;
//   - an error matching ErrLockHeld when this client holds the lease (no
//     attempt is made), when the backend answers that another session
//     holds it, or when another Acquire of this client wins it first;
//   - an error matching ErrBackendUnavailable and ErrLockTimeout when the
//     wait ends while the backend cannot be asked: no session is open
//     within the wait (the client is opening one, or its last keep-alive
//     failed), or every attempt failed with a backend error. An attempt
//     that fails is made again within the wait, so a passing error does
//     not fail the call;
//   - an error matching ErrLockTimeout alone when ctx is done first
//     otherwise.
//
// A deadline of ctx that passed before the call, a timeout of zero, still
// makes the one attempt, bounded by one lease duration alone; a ctx
// cancelled before the call makes none.
func (l *Lock) TryAcquire(ctx context.Context) (*LockTerm, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, l.c.cfg.LeaseDuration)
	defer cancel()
	return l.acquire(ctx, true)
}

func (l *Lock) acquire(ctx context.Context, try bool) (*LockTerm, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if !l.valid.Load() {
		if err := ValidateName(l.name); err != nil {
			return nil, err
		}
		l.valid.Store(true)
	}
	// now is read once for the start of the wait and the first attempt's
	// deadline.
	now := time.Now()
	w := newWaiter(try, now)
	lt, err := l.wait(ctx, w, now)
	// Back to the pool on a return only, w in no queue: a backend that
	// panics (or calls runtime.Goexit) on this goroutine leaves w queued,
	// and a caller that recovers must not get it again for another call.
	w.free()
	return lt, err
}

// wait runs the rounds of an acquire with waiter w, which is in no queue
// and has no result at the top of each round.
func (l *Lock) wait(ctx context.Context, w *waiter, now time.Time) (*LockTerm, error) {
	c, try := l.c, w.try
	seen := &w.seen
	for {
		if ctx.Err() != nil {
			c.lock()
			err := l.timeoutLocked(ctx, seen)
			c.unlock()
			return nil, err
		}
		c.lock()
		e, err := c.entryFor(l.name, kindLock)
		if err != nil {
			c.unlock()
			return nil, err
		}
		if err := e.usePermit(l.permit); err != nil {
			c.unlock()
			return nil, err
		}
		if try && e.holder != nil {
			c.unlock()
			return nil, fmt.Errorf("%w: %s is held by this client", ErrLockHeld, l.name)
		}
		// A TryAcquire behind another acquire of this client waits for the
		// answer to the attempt made for the head of the queue.
		e.waiters = append(e.waiters, w)
		// The only waiter makes the attempt on its own goroutine: no
		// goroutine start and no wake-up on the uncontended path. The call
		// ends with the caller's ctx, or when Close stops it.
		a := e.startAttempt(ctx, now)
		now = time.Time{} // a later round reads the clock afresh
		if a == nil {
			w.blockLocked()
		}
		c.unlock()
		r, err := l.await(ctx, e, w, a)
		if err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		// The usual case takes no lock: the caller still waits and the
		// term is valid. Neither changes back once it changed.
		if ctx.Err() == nil && r.lt.Valid() {
			return r.lt, nil
		}
		c.lock()
		if ctx.Err() != nil {
			// Cancelled while the term arrived: the caller gave up, so
			// the term is released, never returned (R-LOCK-2).
			l.dropTermLocked(r.lt)
			err := l.timeoutLocked(ctx, seen)
			c.unlock()
			return nil, err
		}
		// The term ended right after it was won. Taken over: another
		// session holds the lease. Otherwise the session failed, which
		// says nothing about the lease: contend again within the wait.
		if try && r.lt.Reason() == TakenOver {
			l.dropTermLocked(r.lt)
			c.unlock()
			return nil, fmt.Errorf("%w: %s: taken over by another session as it was won", ErrLockHeld, l.name)
		}
		if try {
			l.dropTermLocked(r.lt)
		}
		c.unlock()
	}
}

// await waits for the result of w, queued on e, first making the attempt
// a when the call is to make it (a is not nil). When ctx ends first, it
// takes w off the queue, or releases the term delivered meanwhile, and
// returns the timeout error.
func (l *Lock) await(ctx context.Context, e *entry, w *waiter, a *attempt) (waitResult, error) {
	c := l.c
	if a != nil {
		e.runAttempt(a)
		if !w.ready.Load() {
			// The answer went to an earlier waiter, or is still to come.
			c.lock()
			w.blockLocked()
			c.unlock()
		}
	}
	if !w.ready.Load() {
		select {
		case <-w.wake:
		case <-ctx.Done():
			c.lock()
			defer c.unlock()
			if !e.dropWaiter(w) {
				if r := w.res; r.lt != nil {
					if rel, ok := r.lt.releaseLocked(); ok {
						c.goBackground(func(ctx context.Context) { _ = rel.do(ctx) })
					}
				}
			}
			if len(e.waiters) == 0 && e.holder == nil {
				e.abandon()
				e.forget()
			}
			return waitResult{}, l.timeoutLocked(ctx, &w.seen)
		}
	}
	r := w.res
	w.next()
	return r, nil
}

// dropTermLocked releases a term won for a caller that will not get it.
// Call with the lock held.
func (l *Lock) dropTermLocked(lt *LockTerm) {
	if rel, ok := lt.releaseLocked(); ok {
		l.c.goBackground(func(ctx context.Context) { _ = rel.do(ctx) })
	}
	lt.e.forget()
}

// timeoutLocked is the error of a wait that ctx ended. It matches
// ErrBackendUnavailable too when the deadline passed while the backend
// could not be asked. Call with the lock held.
func (l *Lock) timeoutLocked(ctx context.Context, seen *waitSeen) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if why := l.unavailableLocked(seen); why != "" {
			return fmt.Errorf("%w: %s: %w (%s): %w", ErrLockTimeout, l.name, ErrBackendUnavailable, why, ctx.Err())
		}
	}
	return fmt.Errorf("%w: %s: %w", ErrLockTimeout, l.name, ctx.Err())
}

// unavailableLocked says why the backend could not be asked during a wait
// that saw seen, or returns "" when it could: this client holds the lock,
// or the session is live and an attempt was answered or none failed. Call
// with the lock held.
func (l *Lock) unavailableLocked(seen *waitSeen) string {
	c := l.c
	if e := c.entries[l.name]; e != nil && e.kind == kindLock && e.holder != nil {
		return ""
	}
	var why string
	switch {
	case c.status == StatusOpening:
		why = "no session open"
	case c.status == StatusSuspended:
		why = "session suspended: its last keep-alive failed"
	case c.status == StatusLive && seen.failed > 0 && !seen.answered:
		why = fmt.Sprintf("%d attempts failed", seen.failed)
		if seen.failed == 1 {
			why = "the attempt failed"
		}
	default:
		return ""
	}
	if seen.lastErr != nil {
		why += "; last attempt: " + seen.lastErr.Error()
	}
	return why
}

// lockTermBuf holds a lock's term and its LockTerm, so that they take one
// allocation.
type lockTermBuf struct {
	lt LockTerm
	t  Term
}

// newLockTerm returns the LockTerm of e for a term won with token: in the
// entry's own buffer for its first term, else in a new one.
func (e *entry) newLockTerm(token uint64, s *session) *LockTerm {
	b := e.termBuf
	if b != nil {
		e.termBuf = nil
	} else {
		b = new(lockTermBuf)
	}
	b.t.init(e.name, token, s.id, s.clock)
	b.lt = LockTerm{Term: &b.t, e: e}
	return &b.lt
}

// lockWon hands a new term, lt, to the first waiter. Call with the lock
// held. The TryAcquire calls still queued get ErrLockHeld: this client
// holds the lock now.
func (e *entry) lockWon(lt *LockTerm) {
	w := e.waiters[0]
	n := copy(e.waiters, e.waiters[1:])
	e.waiters[n] = nil
	e.waiters = e.waiters[:n]
	e.holder = lt
	w.deliver(waitResult{lt: lt})
	e.refuseTries("this client")
}

// refuseTries answers every queued TryAcquire with ErrLockHeld: an attempt
// found the lease held by another session, or this client won it for an
// earlier waiter. by names the holder.
func (e *entry) refuseTries(by string) {
	var err error
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		if !w.try {
			kept = append(kept, w)
			continue
		}
		if err == nil {
			err = fmt.Errorf("%w: %s is held by %s", ErrLockHeld, e.name, by)
		}
		w.deliver(waitResult{err: err})
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
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
	rel, ok := lt.releaseLocked()
	c.unlock()
	if !ok {
		return nil
	}
	err := rel.do(ctx)
	c.lock()
	lt.e.forget()
	c.unlock()
	return err
}

// ReleaseAsync revokes the term (Stopped) at once, as Release does, and
// gives the lease back in the background: the caller does not wait for
// the backend's answer, so a loop that takes and gives back locks pays one
// round trip per lock instead of two. The returned channel receives the
// backend's error (nil on success) once the release is answered, and is
// then closed; it is closed without a value when there was nothing to
// release (R-LOCK-6). Reading it is optional.
//
// Until the answer arrives another node may still see the lease held, and
// an Acquire of the same name by this client may win it again at once,
// with a higher token: the late release carries the old token and frees
// nothing (R-TERM-7). A release still in flight when the client closes is
// cut short (its error reaches the channel); closing the session frees
// the lease anyway.
func (lt *LockTerm) ReleaseAsync() <-chan error {
	done := make(chan error, 1)
	c := lt.e.c
	c.lock()
	defer c.unlock()
	rel, ok := lt.releaseLocked()
	if !ok {
		close(done)
		return done
	}
	c.goBackground(func(ctx context.Context) {
		err := rel.do(ctx)
		c.lock()
		lt.e.forget()
		c.unlock()
		done <- err
		close(done)
	})
	return done
}

// Close releases the term like Release with no deadline of its own, so a
// LockTerm works with defer and io.Closer.
func (lt *LockTerm) Close() error { return lt.Release(context.Background()) }

// releaseLocked ends the term if it still holds the lock and returns the
// backend call to make; ok is false when there is nothing to release.
// Call with the lock held.
func (lt *LockTerm) releaseLocked() (rel releaseCall, ok bool) {
	e := lt.e
	if e.holder != lt {
		return releaseCall{}, false
	}
	e.holder = nil
	if e.term == lt.Term {
		e.term = nil
	}
	if !lt.revoke(Stopped) {
		return releaseCall{}, false
	}
	e.c.emit(Event{Kind: EventRevoked, Session: lt.session, Name: e.name, Token: lt.token, Reason: Stopped, Lock: true})
	rel = e.releaseNow(lt.Term)
	e.contend()
	return rel, true
}
