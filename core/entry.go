package simba

import (
	"context"
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
	// term is won before the old one's OnRevoked is queued, and the entry
	// stays in the client's map (see idle). handover is the term handed
	// over, whose work Close waits for too (R-HO-1), and handoverDone is
	// closed once that handover has queued the OnRevoked, which Close
	// waits for before it waits for the callbacks to drain.
	handingOver bool
	// gone is set once forget has taken the entry out of the client's
	// map, where it never comes back: one that refers to it then holds a
	// stale entry. (Here, so that it fits in handingOver's word.)
	gone         bool
	handover     *Term
	handoverDone chan struct{}
	group        *groupState // the group this entry is a partition of, or nil

	// lock
	waiters []*waiter
	holder  *LockTerm
	waitBuf [1]*waiter // the first backing array of waiters
	permit  *Permit    // the semaphore slot the lock is, or nil
	// termBuf is where the entry's first lock term goes, made with the
	// entry, or nil once used: a lock entry mostly lives for one term.
	termBuf *lockTermBuf
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
		if kind == kindLock {
			both := new(struct {
				e entry
				t lockTermBuf
			})
			e = &both.e
			e.termBuf = &both.t
		} else {
			e = new(entry)
		}
		e.c, e.name, e.kind = c, name, kind
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

// idle reports whether nothing uses the entry any more: no run, term,
// lock holder or waiter, no attempt or release in flight, and no handover
// of a Stop or StepDown still running (its work may run yet, and Close
// finds it through the entry; settle forgets the entry once it ends).
func (e *entry) idle() bool {
	return !e.inUse() && e.attempt == nil && e.unkept == 0 && !e.handingOver
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
	if !e.idle() || e.gone {
		return
	}
	e.stopTimers()
	e.gone = true
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

// releaseNow records the release of t and returns the backend call to
// make, for callers that wait for it (the ordered handover). Call with
// the lock held; make the call without it.
func (e *entry) releaseNow(t *Term) releaseCall {
	c := e.c
	s := c.sess
	if s == nil || s.id != t.session || s.ended {
		return releaseCall{}
	}
	s.noteReleased(e.name, t.token)
	return releaseCall{c: c, s: s, name: e.name, token: t.token}
}

// releaseCall is the backend call that gives the lease of a revoked term
// back. It is a value, so that returning it allocates nothing; the zero
// value sends nothing (the term's session has ended).
type releaseCall struct {
	c     *Client
	s     *session
	name  string
	token uint64
}

// do makes the call, bounded by ctx and the renew period.
func (r releaseCall) do(ctx context.Context) error {
	if r.s == nil {
		return nil
	}
	return r.c.callRelease(ctx, r.s, r.name, r.token)
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

// shutdown ends everything of the entry at Close; the dispatcher of its
// run, if any, joins the client's draining ones, for Close to wait for.
// The session is closed afterwards, which frees the leases at once, so no
// release is sent.
func (e *entry) shutdown() {
	e.abandon()
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
		w.deliver(waitResult{err: ErrClosed})
	}
	e.waiters = nil
}
