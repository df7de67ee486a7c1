package simba

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callContext bounds one backend call by a deadline, like
// context.WithDeadline, but arms no timer until the backend asks for Done
// (or derives a context from it). A backend that answers without waiting,
// as the in-memory one does unless a fault is injected, reads Err and
// Deadline only: its calls then cost no timer start and stop, which was
// about a third of an uncontended acquire+release through the engine.
//
// Until it is armed, Value reads the parent's values. Once armed (by
// Done, AfterFunc, or an Err that is not nil), every method answers for an
// ordinary context.WithDeadline of the parent, so Done, Err, Value and
// context.Cause agree from then on.
type callContext struct {
	parent   context.Context
	deadline time.Time

	// The methods read armed and stopped without a lock: a call that
	// never arms c takes none. mu makes the armed context once.
	armed   atomic.Pointer[armedCall] // nil until Done, AfterFunc or an Err that is not nil
	stopped atomic.Bool
	mu      sync.Mutex
}

// armedCall is the ordinary context that stands for an armed callContext.
type armedCall struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// withCallDeadline returns a context of parent that ends at the deadline
// d from now. Call its stop method once the call has returned, as with the
// cancel function of context.WithTimeout.
func withCallDeadline(parent context.Context, d time.Duration) *callContext {
	c := new(callContext)
	c.init(parent, time.Now().Add(d))
	return c
}

// init makes c, not used before, a context of parent that ends at
// deadline, or at the deadline of parent when that comes first.
func (c *callContext) init(parent context.Context, deadline time.Time) {
	c.parent, c.deadline = parent, deadline
	if pd, ok := parent.Deadline(); ok && pd.Before(deadline) {
		c.deadline = pd
	}
}

// arm returns the ordinary context that stands for c from now on.
func (c *callContext) arm() context.Context {
	if a := c.armed.Load(); a != nil {
		return a.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.armed.Load(); a != nil {
		return a.ctx
	}
	ctx, cancel := context.WithDeadline(c.parent, c.deadline)
	c.armed.Store(&armedCall{ctx: ctx, cancel: cancel})
	// stop stores stopped before it loads armed, and this loads stopped
	// after storing armed: one of the two sees the other, so a stopped c
	// always ends up cancelled.
	if c.stopped.Load() {
		cancel()
	}
	return ctx
}

// stop ends c early; it may be called more than once.
func (c *callContext) stop() {
	c.stopped.Store(true)
	if a := c.armed.Load(); a != nil {
		a.cancel()
	}
}

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *callContext) Done() <-chan struct{} { return c.arm().Done() }

// Err is nil while c is unarmed and neither stopped, past its deadline
// (read from the monotonic clock only) nor ended with its parent. From the
// first error on, c is armed and the armed context answers, so that Err
// keeps returning the same error whatever happens to the parent later.
func (c *callContext) Err() error {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Err()
	}
	if !c.stopped.Load() && c.parent.Err() == nil && time.Until(c.deadline) > 0 {
		return nil
	}
	return c.arm().Err()
}

func (c *callContext) Value(key any) any {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Value(key)
	}
	return c.parent.Value(key)
}

// AfterFunc lets context.AfterFunc, WithCancel and the like derive from c
// without a goroutine of their own: they hang on the armed context.
func (c *callContext) AfterFunc(f func()) func() bool { return context.AfterFunc(c.arm(), f) }

func (c *callContext) String() string { return "simba.callContext" }
