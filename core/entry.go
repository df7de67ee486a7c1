package simba

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// entryKind tells what a name is used for on this client. A lock and an
// election of one name would share one lease, so a client refuses to use a
// name as both at once (R-LOCK-8).
type entryKind int

const (
	kindElection entryKind = iota + 1
	kindLock
)

func (k entryKind) String() string {
	if k == kindLock {
		return "lock"
	}
	return "election"
}

// entry is the engine state of one lease name on this client: the current
// term, the acquire in flight, the candidate's timers. All fields are
// guarded by the client's lock.
type entry struct {
	c    *Client
	name string
	kind entryKind

	term    *Term
	attempt *attempt
	// unkept counts the releases in flight of leases the entry gave back
	// without a term (see release). quiet, made by a Stop or StepDown that waits
	// for them, is closed once neither an attempt nor such a release is in
	// flight.
	unkept int
	quiet  chan struct{}
	retry  *time.Timer
	watch  *watch
	// watchFired is when a release watch last started an attempt.
	watchFired time.Time

	// election
	run      *electionRun // nil while the election is not started
	cooldown time.Time    // no contention before this instant (R-HO-4)
	// handingOver is set while Stop or StepDown hands a term over: no new
	// term is won before the old one's OnRevoked is queued.
	handingOver bool
	group       *groupState // the group this entry is a partition of, or nil

	// lock
	waiters []*waiter
	holder  *LockTerm
	waitBuf [1]*waiter // the first backing array of waiters
}

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
	ctx    *callContext
}

// entryFor returns the entry of name for kind, creating it if needed. Call
// with the lock held.
func (c *Client) entryFor(name string, kind entryKind) (*entry, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if !c.started {
		return nil, fmt.Errorf("simba: %s: %w", name, ErrClientNotStarted)
	}
	e := c.entries[name]
	if e == nil {
		e = &entry{c: c, name: name, kind: kind}
		e.waiters = e.waitBuf[:0]
		c.entries[name] = e
		return e, nil
	}
	if e.kind != kind {
		if e.inUse() {
			return nil, &nameInUseError{name: name, kind: e.kind}
		}
		e.kind = kind
	}
	return e, nil
}

type nameInUseError struct {
	name string
	kind entryKind
}

func (e *nameInUseError) Error() string {
	return "simba: name " + e.name + " is in use by a " + e.kind.String() + " of this client"
}

func (e *nameInUseError) Unwrap() error { return ErrNameInUse }

// inUse reports whether an election run, a term, a lock holder or a lock
// waiter uses the entry.
func (e *entry) inUse() bool {
	return e.run != nil || e.term != nil || len(e.waiters) > 0 || e.holder != nil
}

// idle reports whether nothing uses the entry any more.
func (e *entry) idle() bool {
	return !e.inUse() && e.attempt == nil && e.unkept == 0
}

// awaitQuiet returns a channel closed once no attempt and no release of
// an unkept win is in flight, or nil when none is now. Call with the lock
// held.
func (e *entry) awaitQuiet() <-chan struct{} {
	if e.attempt == nil && e.unkept == 0 {
		return nil
	}
	if e.quiet == nil {
		e.quiet = make(chan struct{})
	}
	return e.quiet
}

// noteQuiet wakes the waiters of awaitQuiet once the entry is quiet. Call
// with the lock held.
func (e *entry) noteQuiet() {
	if e.quiet != nil && e.attempt == nil && e.unkept == 0 {
		close(e.quiet)
		e.quiet = nil
	}
}

// forget drops the entry when idle, and with it the released tokens of its
// name (R-CAND-4: entries go when the election or lock is dropped).
func (e *entry) forget() {
	c := e.c
	if !e.idle() || c.entries[e.name] != e {
		return
	}
	e.stopTimers()
	delete(c.entries, e.name)
	if c.sess != nil {
		delete(c.sess.released, e.name)
	}
}

// wants reports whether the entry should hold a term and does not.
func (e *entry) wants() bool {
	if e.term != nil || e.c.closed || e.handingOver {
		return false
	}
	switch e.kind {
	case kindElection:
		return e.run != nil && !time.Now().Before(e.cooldown) && (e.group == nil || e.group.mayTake())
	default:
		return e.holder == nil && len(e.waiters) > 0
	}
}

// contend starts an acquire if the entry wants a term, the session is
// open and no acquire is in flight (R-CAND-3).
func (e *entry) contend() {
	if a := e.startAttempt(e.c.loopCtx); a != nil {
		e.c.goBackground(func(context.Context) { e.runAttempt(a) })
	}
}

// startAttempt registers an attempt when contend would start one, made
// under parent and bounded by the renew period, and returns it for
// runAttempt (without the lock), or nil. Call with the lock held.
func (e *entry) startAttempt(parent context.Context) *attempt {
	c := e.c
	if !e.wants() || e.attempt != nil || c.sess == nil {
		return nil
	}
	e.stopTimers()
	a := &attempt{sess: c.sess, parent: parent}
	a.ctx = withCallDeadline(parent, a.sess.renewPeriod())
	e.attempt = a
	return a
}

// runAttempt makes the backend call of attempt a and handles its reply.
// Call without the lock.
func (e *entry) runAttempt(a *attempt) {
	c := e.c
	res, err := c.b.Acquire(a.ctx, a.sess.id, e.name)
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
	current := !a.abandoned && a.sess == c.sess && !a.sess.ended && c.entries[e.name] == e
	if err != nil || !res.Won {
		if err != nil && !a.cut && !errors.Is(err, ErrSessionExpired) {
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
	adopt := current && e.wants() && a.sess.clock.remaining() > 0 && res.Token > a.sess.released[e.name]
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
	t := newTerm(e.name, res.Token, a.sess.id, a.sess.clock, now)
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
		e.lockWon(t)
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

// abandon stops contending: the attempt in flight, if any, will release
// what it wins (R-CAND-5).
func (e *entry) abandon() {
	e.stopTimers()
	if e.attempt != nil {
		e.attempt.abandoned = true
	}
}

// release gives the entry's lease back at token in the background: a win
// the entry does not keep, or an orphan a keep-alive reported. A Stop
// waits for it (see awaitQuiet). Call with the lock held.
func (e *entry) release(s *session, token uint64) {
	if e.c.releaseAsync(s, e.name, token, e.released) {
		e.unkept++
	}
}

// released runs once a release started by release was answered. Call
// with the lock held.
func (e *entry) released() {
	e.unkept--
	e.noteQuiet()
	e.forget()
}

// releaseNow records the release of t and returns a function that makes
// the backend call, for callers that wait for it (the ordered handover).
// Call with the lock held; call the function without it.
func (e *entry) releaseNow(t *Term) func(ctx context.Context) error {
	c := e.c
	s := c.sess
	if s == nil || s.id != t.session || s.ended {
		return func(context.Context) error { return nil }
	}
	s.noteReleased(e.name, t.token)
	return func(ctx context.Context) error { return c.callRelease(ctx, s, e.name, t.token) }
}

// lost ends the current term for a reason that is not waited for
// (deadline, expiry, take-over: R-HO-3). No release is sent: the session
// is gone or the lease is someone else's.
func (e *entry) lost(reason RevokeReason) {
	t := e.term
	if t == nil {
		return
	}
	e.term = nil
	if !t.revoke(reason) {
		return
	}
	e.c.emit(Event{Kind: EventRevoked, Session: t.session, Name: e.name, Token: t.token, Reason: reason, Lock: e.kind == kindLock})
	switch e.kind {
	case kindElection:
		e.revokedElection(t, reason)
	default:
		e.lockLost(t)
	}
	e.contend()
}

// shutdown ends everything of the entry at Close and returns the
// dispatcher to wait for, if any. The session is closed afterwards, which
// frees the leases at once, so no release is sent.
func (e *entry) shutdown() *dispatcher {
	e.abandon()
	var d *dispatcher
	if e.run != nil {
		d = e.run.d
	}
	if t := e.term; t != nil {
		e.term = nil
		if t.revoke(Stopped) {
			e.c.emit(Event{Kind: EventRevoked, Session: t.session, Name: e.name, Token: t.token, Reason: Stopped, Lock: e.kind == kindLock})
			if e.kind == kindElection {
				e.revokedElection(t, Stopped)
			}
		}
	}
	e.endRun()
	e.holder = nil
	for _, w := range e.waiters {
		w.done <- waitResult{err: ErrClosed}
	}
	e.waiters = nil
	return d
}
