package simba

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// attempt is one acquire call in flight (R-CAND-3).
type attempt struct {
	sess      *session
	abandoned bool
	// cut is set when the call failed because its caller gave up or the
	// client closed, not because of the backend.
	cut bool
	// parent is the context the call was made under (the client's loop,
	// or the caller's for an attempt made on the caller's goroutine); ctx
	// is parent bounded by the renew period.
	parent context.Context
	ctx    callContext
	permit *Permit // the permit the entry served when the attempt started, or nil
}

// contend starts an acquire if the entry wants a term, the session is
// open and no acquire is in flight (R-CAND-3).
func (e *entry) contend() {
	if a := e.startAttempt(e.c.loopCtx, time.Time{}); a != nil {
		e.c.goBackground(func(context.Context) { e.runAttempt(a) })
	}
}

// startAttempt registers an attempt when contend would start one, made
// under parent and bounded by the renew period from now (read from the
// clock when zero, so that a caller that has just read it need not read it
// again), and returns it for runAttempt (without the lock), or nil. Call
// with the lock held.
func (e *entry) startAttempt(parent context.Context, now time.Time) *attempt {
	c := e.c
	if !e.wants() || e.attempt != nil || c.sess == nil {
		return nil
	}
	e.stopTimers()
	if now.IsZero() {
		now = time.Now()
	}
	a := &attempt{sess: c.sess, parent: parent, permit: e.permit}
	a.ctx.init(parent, now.Add(a.sess.renewPeriod()))
	e.attempt = a
	return a
}

// runAttempt makes the backend call of attempt a and handles its reply.
// Call without the lock.
func (e *entry) runAttempt(a *attempt) {
	c := e.c
	res, err := c.acquireCall(a, e.name)
	a.ctx.stop()
	now := time.Now()
	c.lock()
	defer c.unlock()
	if err != nil && !errors.Is(err, ErrSessionExpired) {
		c.noteUnsure(a.sess, e.name, now)
	}
	a.cut = err != nil && (ended(a.parent, now) || c.closed)
	e.acquired(a, res, err, now)
}

// ended reports whether ctx is done or its deadline is not after now:
// the timer of a deadline may fire a moment after a call bounded by the
// same instant returned.
func ended(ctx context.Context, now time.Time) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !d.After(now)
}

// acquired handles the reply to attempt a, received at now (R-CAND-4,5).
func (e *entry) acquired(a *attempt, res AcquireResult, err error, now time.Time) {
	c := e.c
	e.attempt = nil
	defer e.noteQuiet()
	if !a.cut {
		e.noteAttempt(err)
	}
	current := !a.abandoned && a.sess == c.sess && !a.sess.ended && !e.gone
	if err != nil || !res.Won {
		if errors.Is(err, ErrPermitsMismatch) {
			e.failWaiters(err)
		} else if err != nil && !a.cut && !errors.Is(err, ErrSessionExpired) {
			c.emit(Event{Kind: EventBackendError, Name: e.name, Err: err})
		}
		if current {
			e.lostAttempt(err == nil, a.cut)
		} else {
			e.contend()
		}
		e.forget()
		return
	}
	adopt := current && e.wants() && a.sess.clock.remainingAt(now) > 0 && res.Token > a.sess.released[e.name]
	if !adopt {
		e.release(a.sess, res.Token)
		if current {
			e.lostAttempt(false, false)
		} else {
			e.contend()
		}
		e.forget()
		return
	}
	var t *Term
	var lt *LockTerm
	if e.kind == kindElection {
		t = newTerm(e.name, res.Token, a.sess.id, a.sess.clock)
	} else {
		lt = e.newLockTerm(res.Token, a.sess)
		t = lt.Term
	}
	e.term = t
	elected := Event{Kind: EventElected, Time: now, Session: t.session, Name: e.name, Token: t.token, Lock: e.kind == kindLock}
	if e.kind == kindLock && len(e.waiters) > 0 {
		elected.Waited = now.Sub(e.waiters[0].seen.start)
	}
	c.emit(elected)
	switch e.kind {
	case kindElection:
		e.elected(t)
		if g := e.group; g != nil && g.members > 0 && g.held() > g.ceil() {
			c.shed(g, g.ceil())
		}
	default:
		e.lockWon(lt)
	}
}

// lostAttempt schedules the next attempt after one that did not win:
// jittered (R-CAND-1), or at once when the backend reports a release
// (R-CAND-2). answered is false when the attempt failed; cut is set when
// it failed because its caller gave up (a lock waiter behind it still
// waits for the release it watched before the attempt started).
func (e *entry) lostAttempt(answered, cut bool) {
	if e.kind == kindLock && answered {
		e.refuseTries("another session")
	}
	if !e.wants() {
		return
	}
	e.scheduleRetry(e.c.jitteredRetry())
	if (answered || cut) && e.c.notifier != nil && e.watch == nil {
		e.startWatch()
	}
}

// scheduleRetry arms the candidate timer. Call with the lock held.
func (e *entry) scheduleRetry(d time.Duration) {
	c := e.c
	if e.retry != nil {
		e.retry.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		c.lock()
		defer c.unlock()
		if e.retry == t {
			e.retry = nil
			e.contend()
		}
	})
	e.retry = t
}

// startWatch asks the backend to report a release of the name.
func (e *entry) startWatch() {
	c := e.c
	ctx, cancel := context.WithCancel(c.loopCtx)
	w := &watch{cancel: cancel}
	e.watch = w
	c.goBackground(func(context.Context) {
		defer cancel()
		fired := false
		if ch, err := c.notifier.WatchRelease(ctx, e.name); err == nil {
			select {
			case <-ch:
				fired = true
			case <-ctx.Done():
			}
		}
		c.lock()
		defer c.unlock()
		if e.watch != w {
			return
		}
		e.watch = nil
		if !fired {
			return
		}
		// Backends may wake a watch spuriously: at most one attempt per
		// MinBackoff comes from watches; a wake sooner than that moves the
		// next attempt to the end of that MinBackoff.
		now := time.Now()
		if wait := c.cfg.MinBackoff - now.Sub(e.watchFired); wait > 0 {
			e.scheduleRetry(wait)
			return
		}
		e.watchFired = now
		e.contend()
	})
}

// watch is a release watch in progress.
type watch struct{ cancel context.CancelFunc }

// stopTimers stops the retry timer and the release watch.
func (e *entry) stopTimers() {
	if e.retry != nil {
		e.retry.Stop()
		e.retry = nil
	}
	if e.watch != nil {
		e.watch.cancel()
		e.watch = nil
	}
}

// jitteredRetry is a candidate's wait between attempts (R-CAND-1).
func (c *Client) jitteredRetry() time.Duration {
	d := c.cfg.RenewInterval / 2
	if c.cfg.RetryJitter > 0 {
		d += rand.N(c.cfg.RetryJitter)
	}
	return d
}
