package simba

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// WorkFunc is leader work. It runs with a ctx that is cancelled when the
// term ends (R-WORK-1) and should return soon after: the ordered handover
// of Stop and StepDown waits for it, at most until the term's local
// deadline, before releasing the lease (R-HO-1). Pass t.Token() to every
// protected resource it writes to.
type WorkFunc func(ctx context.Context, t *Term) error

// WorkOption configures RunWhileLeader and Schedule.
type WorkOption func(*workOptions)

type workOptions struct {
	stepDown     bool
	cooldown     time.Duration
	initialDelay time.Duration
	fixedDelay   bool
}

// StepDownOnError makes a failed work step the election down for cooldown
// instead of ending the call: the failure is reported (an EventWorkFailed
// carrying a *WorkError, and an error log line), another node may take the
// lease over meanwhile, and the election contends again after cooldown.
// Without it, RunWhileLeader and Group.Run return the failure, and a
// failed Schedule run is reported while the schedule goes on.
func StepDownOnError(cooldown time.Duration) WorkOption {
	return func(o *workOptions) { o.stepDown, o.cooldown = true, max(cooldown, 0) }
}

// WithInitialDelay makes Schedule wait d after each election before the
// first run. The default is to run at once.
func WithInitialDelay(d time.Duration) WorkOption {
	return func(o *workOptions) { o.initialDelay = max(d, 0) }
}

// FixedDelay makes Schedule wait its period between the end of a run and
// the start of the next. The default is a fixed rate: runs start every
// period, and a run that overruns skips the starts it missed.
func FixedDelay() WorkOption { return func(o *workOptions) { o.fixedDelay = true } }

// workKey marks the ctx of leader work with its term, so that Stop,
// StepDown and Client.Close called from the work do not wait for it.
type workKey struct{}

func workTerm(ctx context.Context) *Term { return contextValue[*Term](ctx, workKey{}) }

// RunWhileLeader starts the election and runs fn once per term won, with
// a ctx that ends with the term (R-WORK-1). It blocks until one of these,
// and always stops the election with the ordered handover before it
// returns (the work has exited, or the term's deadline passed, before the
// lease is released: R-HO-1). It returns only once every work it started
// has exited, or its term's deadline passed, that of a term lost before
// (taken over, or past its deadline) included:
//
//   - ctx is done: it returns nil;
//   - fn returns while its term lasts: the work is over, so the node stops
//     leading, and RunWhileLeader returns nil when fn returned nil, or a
//     *WorkError wrapping fn's error (a panic of fn is recovered and
//     returned the same way). With StepDownOnError, a failure steps the
//     election down for the cooldown instead, and the call goes on;
//   - the client is closed: it returns an error matching ErrClosed;
//   - the election is stopped by a Stop call elsewhere: it returns nil.
//
// Work interrupted because its term ended (lost, taken over, stepped down)
// does not end the call: the election contends again and fn runs again on
// the next term. It fails like Start (invalid name, already started,
// closed client) and on a nil ctx or fn. See docs/adr/0004-leader-work-outcomes.md.
func (el *Election) RunWhileLeader(ctx context.Context, fn WorkFunc, opts ...WorkOption) error {
	if ctx == nil || fn == nil {
		return fmt.Errorf("%w: nil context or work function", ErrInvalidArgument)
	}
	w := newWorkRunner(el, fn, workOpts(opts), nil)
	run, err := el.start(w)
	if err != nil {
		return err
	}
	var result error
	select {
	case <-ctx.Done():
	case result = <-w.finished:
	case <-run.ended:
		// Stopped elsewhere, or the client closed: the work was interrupted;
		// return once it exited, as the handover does.
		w.awaitWork()
		if el.c.isClosed() {
			return fmt.Errorf("simba: election %s: %w", el.name, ErrClosed)
		}
		return nil
	}
	err = el.end(context.WithoutCancel(ctx), Stopped, 0, run, nil)
	// The stop waited for the work of the term held then; the work of a
	// term lost before may still be exiting.
	w.awaitWork()
	if errors.Is(err, ErrClosed) && result == nil && ctx.Err() == nil {
		return fmt.Errorf("simba: election %s: %w", el.name, ErrClosed)
	}
	return result
}

func workOpts(opts []WorkOption) workOptions {
	var o workOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Schedule runs fn every period on the leader only (R-WORK-2), passing the
// term so the work can send its token, until ctx is done (it returns nil)
// or the client is closed (an error matching ErrClosed). Runs follow a
// fixed rate unless FixedDelay is given; WithInitialDelay delays the first
// run of each term. A run that fails (an error or a panic) is reported, an
// EventWorkFailed carrying a *WorkError and an error log line, and the
// schedule goes on at its next run; with StepDownOnError the election
// steps down for the cooldown instead.
func (el *Election) Schedule(ctx context.Context, period time.Duration, fn WorkFunc, opts ...WorkOption) error {
	if period <= 0 {
		return fmt.Errorf("%w: schedule period %v must be positive", ErrInvalidArgument, period)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil work function", ErrInvalidArgument)
	}
	o := workOpts(opts)
	loop := func(ctx context.Context, t *Term) error {
		next := time.Now().Add(o.initialDelay)
		timer := time.NewTimer(o.initialDelay)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
			interrupted, err := el.c.runWork(ctx, t, fn)
			if interrupted {
				<-ctx.Done() // the term ended: the engine revokes it
				return nil
			}
			if err != nil && o.stepDown {
				return err
			}
			now := time.Now()
			if o.fixedDelay {
				next = now.Add(period)
			} else {
				// The first start after now on next's grid: the starts a
				// run overran are skipped.
				next = next.Add(period * (now.Sub(next)/period + 1))
			}
			timer.Reset(next.Sub(now))
		}
	}
	return el.RunWhileLeader(ctx, loop, opts...)
}

// runWork runs fn, turning a panic into an error. It reports whether the
// work was interrupted: its term ended (revoked, or its deadline passed)
// by the time it returned; otherwise a failure is reported as a *WorkError
// (EventWorkFailed and an error log line). A *WorkError of this same term
// that fn returns, from a nested runWork, is passed on as it is, reported
// once.
func (c *Client) runWork(ctx context.Context, t *Term, fn WorkFunc) (interrupted bool, err error) {
	defer func() {
		r := recover()
		interrupted = ctx.Err() != nil || !t.Valid()
		var we *WorkError
		switch {
		case r != nil:
			err = &WorkError{Name: t.name, Token: t.token, Panic: r,
				Err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
		case err == nil:
			return
		case errors.As(err, &we) && we.Name == t.name && we.Token == t.token:
			return
		default:
			err = &WorkError{Name: t.name, Token: t.token, Err: err}
		}
		if !interrupted {
			c.lock()
			c.emit(Event{Kind: EventWorkFailed, Session: t.session, Name: t.name, Token: t.token, Err: err})
			c.unlock()
			c.log.Error("simba: leader work failed", "name", t.name, "token", t.token, "err", err)
		}
	}()
	return false, fn(ctx, t)
}

// workRunner is the listener behind RunWhileLeader, Schedule and the
// partitions of Group.Run: it runs the work on a goroutine of its own for
// every term, and decides what a work that returns while its term lasts
// means (docs/adr/0004-leader-work-outcomes.md).
type workRunner struct {
	el   *Election
	fn   WorkFunc
	opts workOptions
	// finished receives the outcome of the first work that returned while
	// its term lasted and did not step down: nil or a *WorkError. Partitions
	// of a group share their group's channel.
	finished chan error
	// partition is set for the partitions of a group: a partition work that
	// returns nil gives its partition up instead of ending the group.
	partition bool
	// over is set once an outcome was sent: no later term runs the work
	// again before the call stops the election.
	over atomic.Bool

	mu     sync.Mutex
	active map[*Term]struct{} // terms whose work runs
}

func newWorkRunner(el *Election, fn WorkFunc, o workOptions, finished chan error) *workRunner {
	w := &workRunner{el: el, fn: fn, opts: o, finished: finished, partition: finished != nil,
		active: make(map[*Term]struct{})}
	if w.finished == nil {
		w.finished = make(chan error, 1)
	}
	return w
}

func (w *workRunner) OnElected(_ context.Context, t *Term) {
	if w.over.Load() || !t.addWork() {
		return
	}
	w.mu.Lock()
	w.active[t] = struct{}{}
	w.mu.Unlock()
	ctx := context.WithValue(t.Context(), workKey{}, t)
	go func() {
		defer func() {
			w.mu.Lock()
			delete(w.active, t)
			w.mu.Unlock()
			t.doneWork()
		}()
		interrupted, err := w.el.c.runWork(ctx, t, w.fn)
		switch {
		case interrupted:
			// The term ended: the election goes on, and the work runs again
			// on the next term.
		case err != nil && w.opts.stepDown:
			_ = w.el.end(ctx, SteppedDown, w.opts.cooldown, nil, t)
		case err == nil && w.partition:
			// Nothing left to do on this partition for now: give it up, so
			// that the group rebalances it (another node, or this one later).
			_ = w.el.end(ctx, SteppedDown, w.el.c.cfg.RenewInterval, nil, t)
		default:
			w.over.Store(true)
			select {
			case w.finished <- err:
			default: // another outcome came first
			}
		}
	}()
}

func (w *workRunner) OnRevoked(context.Context, *Term, RevokeReason) {}

// awaitWork waits until the work of every term of w has exited, each
// bounded by the deadline its term had when it was revoked (R-HO-1): a
// session renewed since does not make it wait longer. The terms have been
// revoked.
func (w *workRunner) awaitWork() {
	w.mu.Lock()
	terms := make([]*Term, 0, len(w.active))
	for t := range w.active {
		terms = append(terms, t)
	}
	w.mu.Unlock()
	for _, t := range terms {
		t.awaitEnded()
	}
}
