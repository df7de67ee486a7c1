package simba

import (
	"sync"
	"sync/atomic"
	"time"
)

// An Acquire or TryAcquire call queues one waiter at a time; it queues the
// same one again when it contends again within its wait. The engine hands
// a queued waiter its result with deliver, taking it off the queue. A call
// that made the attempt itself usually finds the result there when the
// attempt returns: only a call that has to block makes the channel it
// waits on.
type waiter struct {
	try  bool
	seen waitSeen // what happened to the attempts during the whole call

	ready atomic.Bool   // res is set
	res   waitResult    // written by deliver, before ready
	wake  chan struct{} // made under the lock by a call that blocks; closed by deliver
}

type waitResult struct {
	lt  *LockTerm
	err error
}

// deliver hands w its result. Call with the lock held, w taken off its
// queue. It touches nothing of w once ready is set, as the call may then
// return.
func (w *waiter) deliver(r waitResult) {
	wake := w.wake
	w.res = r
	w.ready.Store(true)
	if wake != nil {
		close(wake)
	}
}

// blockLocked makes the channel that deliver closes, unless a result is
// there already. Call with the lock held.
func (w *waiter) blockLocked() {
	if !w.ready.Load() {
		w.wake = make(chan struct{})
	}
}

// next readies w, in no queue, for another round of its call.
func (w *waiter) next() {
	w.ready.Store(false)
	w.res = waitResult{}
	w.wake = nil
}

// waiterPool keeps the waiters of the calls that have returned (not of
// those a panic ended). A call returns only once its waiter is in no
// queue and holds no result not yet taken: every sender takes the waiter
// off its queue as it delivers, and touches nothing of it after, and a
// call whose ctx ended takes it off itself or takes what was delivered.
// So nothing refers to a waiter once its call has returned. A waiter
// keeps no channel between calls: a channel belongs to the synctest
// bubble it was made in.
var waiterPool = sync.Pool{New: func() any { return new(waiter) }}

// newWaiter returns a waiter for a call that began at start.
func newWaiter(try bool, start time.Time) *waiter {
	w := waiterPool.Get().(*waiter)
	w.try, w.seen = try, waitSeen{start: start}
	return w
}

// free gives w back once its call has returned.
func (w *waiter) free() {
	w.next()
	w.seen = waitSeen{} // drop the error it refers to
	waiterPool.Put(w)
}

// waitSeen is what the backend did with the attempts made while one
// Acquire or TryAcquire call waited. Guarded by the client's lock.
type waitSeen struct {
	start    time.Time // when the call began
	answered bool      // an attempt was answered: won, or held by another session
	failed   int       // attempts that failed with a backend error
	lastErr  error     // the error of the last attempt, nil when it was answered
}

// noteAttempt records the outcome of an attempt at the lock for every
// waiter: answered (err is nil) or failed with err. Call with the lock
// held.
func (e *entry) noteAttempt(err error) {
	for _, w := range e.waiters {
		if err == nil {
			w.seen.answered = true
			w.seen.lastErr = nil
		} else {
			w.seen.failed++
			w.seen.lastErr = err
		}
	}
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
