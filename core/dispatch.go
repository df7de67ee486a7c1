package simba

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
)

// Executor runs callbacks: election listeners and event listeners. The
// engine hands it one callback at a time per election and per event
// listener, in order, and never while holding an internal lock (R-CB-2).
// The default runs each callback on a new goroutine.
type Executor interface {
	// Execute runs task, now or later, on a goroutine of its choice. An
	// error means the task was rejected and will not run (R-CB-6).
	Execute(task func()) error
}

// goExecutor is the default Executor: one goroutine per callback.
type goExecutor struct{}

func (goExecutor) Execute(task func()) error {
	go task()
	return nil
}

// callbackKey marks the context passed to callbacks and leader work, so a
// blocking call made from there (Stop, StepDown, Client.Close) does not wait
// for itself (R-CB-5).
type callbackKey struct{}

// callbackDispatcher returns the dispatcher whose callback ctx belongs to,
// or nil.
func callbackDispatcher(ctx context.Context) *dispatcher {
	return contextValue[*dispatcher](ctx, callbackKey{})
}

// contextValue returns the value of key in ctx, the zero T when ctx is nil
// or has no T there.
func contextValue[T any](ctx context.Context, key any) T {
	var v T
	if ctx != nil {
		v, _ = ctx.Value(key).(T)
	}
	return v
}

// task is one callback. rejected, when set, runs instead of run if the
// executor refuses the task; otherwise a refused task runs on its own
// goroutine, so that callbacks stay paired. A panic of run is recovered
// and handed to panicked, so that a listener cannot crash the process nor
// stop the queue; without panicked it is dropped.
type task struct {
	run      func(ctx context.Context)
	rejected func()
	panicked func(err error)
}

// dispatcher runs the tasks pushed to it one at a time, in order, over an
// Executor: the serial dispatcher of one election, or of one event
// listener. In the steady state it allocates nothing per task: the
// queue's array is reused, the executor always gets the same function, and
// the drained channel is made only for a caller of idle.
type dispatcher struct {
	exec    Executor
	ctx     context.Context // carries callbackKey -> this dispatcher
	runHead func()          // d.runFirst, made once

	mu      sync.Mutex
	queue   []task // queue[head:] waits; the head is popped by the task that runs it
	head    int
	busy    bool
	drained chan struct{} // made by idle while busy, closed when the queue empties
}

func newDispatcher(exec Executor) *dispatcher {
	d := &dispatcher{exec: exec}
	d.ctx = context.WithValue(context.Background(), callbackKey{}, d)
	d.runHead = d.runFirst
	return d
}

// push queues t and starts running the queue. It must not be called with
// the engine's lock held: a rejected task's fallback may call into the
// engine.
func (d *dispatcher) push(t task) {
	d.enqueue(t)
	d.kick()
}

// enqueue queues t without running anything, so the engine calls it under
// its lock: tasks queued by one critical section after another keep that
// order (an OnElected is never overtaken by its term's OnRevoked). The
// engine calls kick once the lock is released.
func (d *dispatcher) enqueue(t task) {
	d.mu.Lock()
	d.queue = append(d.queue, t)
	d.mu.Unlock()
}

// kick starts running the queue unless it is empty or already running.
func (d *dispatcher) kick() {
	d.mu.Lock()
	if d.busy || d.head == len(d.queue) {
		d.mu.Unlock()
		return
	}
	d.busy = true
	d.mu.Unlock()
	d.next()
}

// pop removes the head of the queue; the queue must not be empty. Call
// with d.mu held.
func (d *dispatcher) pop() task {
	t := d.queue[d.head]
	d.queue[d.head] = task{}
	d.head++
	if d.head == len(d.queue) {
		d.queue, d.head = d.queue[:0], 0
	}
	return t
}

// next hands the head of the queue to the executor; the task, once run,
// calls next again. It returns when a task was accepted or the queue is
// empty. Only the dispatcher's one running chain pops, so the head the
// executor accepted is still the head when runFirst pops it.
func (d *dispatcher) next() {
	for {
		d.mu.Lock()
		if d.head == len(d.queue) {
			d.busy = false
			if d.drained != nil {
				close(d.drained)
				d.drained = nil
			}
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()

		err := d.exec.Execute(d.runHead)
		if err == nil {
			return
		}
		d.mu.Lock()
		t := d.pop()
		d.mu.Unlock()
		if t.rejected != nil {
			t.rejected()
			continue
		}
		go d.runTask(t)
		return
	}
}

// runFirst pops the head of the queue and runs it: what the executor runs.
func (d *dispatcher) runFirst() {
	d.mu.Lock()
	t := d.pop()
	d.mu.Unlock()
	d.runTask(t)
}

// runTask runs t, recovering a panic, then the rest of the queue.
func (d *dispatcher) runTask(t task) {
	defer d.next()
	defer func() {
		if r := recover(); r != nil && t.panicked != nil {
			t.panicked(fmt.Errorf("panic: %v\n%s", r, debug.Stack()))
		}
	}()
	t.run(d.ctx)
}

// barrier returns a channel closed once every task pushed before the call
// has run.
func (d *dispatcher) barrier() <-chan struct{} {
	done := make(chan struct{})
	d.push(task{run: func(context.Context) { close(done) }, rejected: func() { close(done) }})
	return done
}

// isDrained reports whether the queue is empty and nothing of it runs.
func (d *dispatcher) isDrained() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.busy && d.head == len(d.queue)
}

// idle returns a channel closed when the queue is empty.
func (d *dispatcher) idle() <-chan struct{} {
	d.kick()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.busy {
		return closedChan
	}
	if d.drained == nil {
		d.drained = make(chan struct{})
	}
	return d.drained
}

// closedChan is a channel that is always closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
