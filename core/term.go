package simba

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// RevokeReason says why a term ended (R-TERM-6).
type RevokeReason int

// The reasons a term ends. The zero value, NotRevoked, is what Term.Reason
// reports while the term lasts.
const (
	NotRevoked     RevokeReason = iota
	Stopped                     // the election was stopped, the lock released or the client closed
	SteppedDown                 // the election stepped down
	DeadlinePassed              // the session's local deadline passed without a successful keep-alive
	SessionExpired              // the backend reported the session expired
	TakenOver                   // a keep-alive reply no longer listed the lease as this session's
)

var reasonNames = [...]string{"NOT_REVOKED", "STOPPED", "STEPPED_DOWN", "DEADLINE_PASSED", "SESSION_EXPIRED", "TAKEN_OVER"}

func (r RevokeReason) String() string {
	if r < 0 || int(r) >= len(reasonNames) {
		return fmt.Sprintf("RevokeReason(%d)", int(r))
	}
	return reasonNames[r]
}

// MarshalText makes reasons read as their names in JSON and logs.
func (r RevokeReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Term is one period during which this node owns a lease. Winning the same
// name twice gives two terms (R-TERM-1). A Term is safe for concurrent use
// and may be handed to any goroutine.
//
// Valid and Remaining are computed from the monotonic clock on every call:
// a process that wakes from a long pause reads false at once, before the
// engine has had a chance to revoke the term, and an ended term never
// becomes valid again (R-TERM-3, R-TERM-4).
type Term struct {
	name    string
	token   uint64
	clock   *sessionClock
	session SessionID

	ended  atomic.Bool
	muted  atomic.Bool // OnElected was rejected: no OnRevoked either (R-CB-6)
	reason atomic.Int32

	// Guarded by workMu. The context is made when first asked for (most
	// lock terms never are); revoked is set once revoke has stored the
	// reason, so a context made later is born cancelled.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	revoked bool
	// endedBy is the session's local deadline when the term was revoked:
	// the latest instant its work is waited for once the term is over,
	// however long the session is renewed afterwards.
	endedBy time.Time

	// Leader work running on the term; the ordered handover waits for it.
	workMu   sync.Mutex
	workers  int
	workIdle chan struct{} // closed when workers drops to zero
}

func newTerm(name string, token uint64, session SessionID, clock *sessionClock) *Term {
	t := new(Term)
	t.init(name, token, session, clock)
	return t
}

// init sets the fields of a new term, not used before.
func (t *Term) init(name string, token uint64, session SessionID, clock *sessionClock) {
	t.name, t.token, t.session, t.clock = name, token, session, clock
}

// context returns the term's context, making it on the first call.
func (t *Term) context() context.Context {
	t.workMu.Lock()
	defer t.workMu.Unlock()
	if t.ctx == nil {
		t.ctx, t.cancel = context.WithCancelCause(context.Background())
		if t.revoked {
			t.cancel(revokeCauses[t.reason.Load()])
		}
	}
	return t.ctx
}

// Name returns the lease name.
func (t *Term) Name() string { return t.name }

// Token returns the fencing token: greater than zero, constant within the
// term, strictly increasing across the terms of a name (R-TERM-2). Pass it
// with every write to a protected resource.
func (t *Term) Token() uint64 { return t.token }

// Session returns the id of the session that won the term.
func (t *Term) Session() SessionID { return t.session }

// Valid reports whether the term has not been revoked and the session's
// local deadline has not passed.
func (t *Term) Valid() bool {
	return !t.ended.Load() && t.clock.remaining() > 0
}

// Remaining returns the time left before the session's local deadline, or
// zero once the term has ended.
func (t *Term) Remaining() time.Duration {
	if t.ended.Load() {
		return 0
	}
	return max(t.clock.remaining(), 0)
}

// EnsureValid returns nil when the term stays valid for more than
// minRemaining, and an error wrapping ErrTermExpired otherwise (R-TERM-5).
// A term that has ended, or whose local deadline has passed, always fails,
// whatever minRemaining (a negative one included). Call it before a step
// that should not start when the term is about to end; it narrows the
// window for a stale owner, it does not close it (pass Token to the
// resource for that).
func (t *Term) EnsureValid(minRemaining time.Duration) error {
	if t.ended.Load() {
		return fmt.Errorf("%w: %s token %d ended: %s", ErrTermExpired, t.name, t.token, t.Reason())
	}
	r := t.clock.remaining()
	if r <= 0 {
		return fmt.Errorf("%w: %s token %d: the local deadline passed", ErrTermExpired, t.name, t.token)
	}
	if r <= minRemaining {
		return fmt.Errorf("%w: %s token %d has %v left, %v needed", ErrTermExpired, t.name, t.token, r, minRemaining)
	}
	return nil
}

// Done returns a channel closed when the term is revoked.
func (t *Term) Done() <-chan struct{} { return t.context().Done() }

// Context returns a context cancelled when the term is revoked; its cause
// (context.Cause) is an error wrapping ErrTermExpired that names the
// reason.
func (t *Term) Context() context.Context { return t.context() }

// Reason returns why the term ended, or NotRevoked while it lasts.
func (t *Term) Reason() RevokeReason { return RevokeReason(t.reason.Load()) }

func (t *Term) String() string {
	return fmt.Sprintf("term %s token %d", t.name, t.token)
}

// revoke ends the term with reason; it reports false when the term had
// already ended, so each term is revoked exactly once (R-TERM-6).
func (t *Term) revoke(reason RevokeReason) bool {
	if !t.ended.CompareAndSwap(false, true) {
		return false
	}
	t.reason.Store(int32(reason))
	t.workMu.Lock()
	t.revoked = true
	t.endedBy = t.clock.deadlineTime()
	cancel := t.cancel
	t.workMu.Unlock()
	if cancel != nil {
		cancel(revokeCauses[reason])
	}
	return true
}

// revokeCauses are the causes of a term's context, one per reason, made
// once: revoking a term allocates nothing for its message.
var revokeCauses = func() (c [len(reasonNames)]error) {
	for r := range c {
		c[r] = fmt.Errorf("%w: %s", ErrTermExpired, RevokeReason(r))
	}
	return c
}()

// addWork registers work running on t, and reports false when t has
// already ended (the work must not start).
func (t *Term) addWork() bool {
	t.workMu.Lock()
	defer t.workMu.Unlock()
	if t.ended.Load() {
		return false
	}
	if t.workers == 0 {
		t.workIdle = make(chan struct{})
	}
	t.workers++
	return true
}

// doneWork records that one work registered with addWork has exited.
func (t *Term) doneWork() {
	t.workMu.Lock()
	defer t.workMu.Unlock()
	t.workers--
	if t.workers == 0 {
		close(t.workIdle)
	}
}

// working reports whether leader work runs on t.
func (t *Term) working() bool {
	t.workMu.Lock()
	defer t.workMu.Unlock()
	return t.workers > 0
}

// awaitEnded waits, after the term was revoked, until its work has exited
// or the session's local deadline at the revoke has passed.
func (t *Term) awaitEnded() {
	t.workMu.Lock()
	deadline := t.endedBy
	t.workMu.Unlock()
	t.awaitWork(deadline)
}

// awaitWork waits, after the term was revoked, until its work has exited
// or deadline has passed, whichever comes first (R-HO-1).
func (t *Term) awaitWork(deadline time.Time) {
	t.workMu.Lock()
	idle := t.workIdle
	busy := t.workers > 0
	t.workMu.Unlock()
	if !busy {
		return
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
	}
}
