package simba

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
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

// StepDownOnError makes the election step down for cooldown when the work
// returns an error or panics. By default the node keeps leading and the
// failure is only reported (an EventWorkFailed and a log line).
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

func workTerm(ctx context.Context) *Term {
	if ctx == nil {
		return nil
	}
	t, _ := ctx.Value(workKey{}).(*Term)
	return t
}

// RunWhileLeader starts the election and runs fn once per term won, until
// ctx is done; then it stops the election with the ordered handover and
// returns nil. A work function that fails or panics is reported and does
// not end the client; see StepDownOnError. It fails like Start (invalid
// name, already started, closed client) and on a nil fn.
func (el *Election) RunWhileLeader(ctx context.Context, fn WorkFunc, opts ...WorkOption) error {
	if ctx == nil || fn == nil {
		return fmt.Errorf("%w: nil context or work function", ErrInvalidArgument)
	}
	var o workOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := el.Start(&workRunner{el: el, fn: fn, opts: o}); err != nil {
		return err
	}
	<-ctx.Done()
	if err := el.Stop(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

// Schedule runs fn every period on the leader only (R-WORK-2), passing the
// term so the work can send its token, until ctx is done. Runs follow a
// fixed rate unless FixedDelay is given; WithInitialDelay delays the first
// run of each term. An error or panic of one run is reported and the
// schedule goes on, unless StepDownOnError is given.
func (el *Election) Schedule(ctx context.Context, period time.Duration, fn WorkFunc, opts ...WorkOption) error {
	if period <= 0 {
		return fmt.Errorf("%w: schedule period %v must be positive", ErrInvalidArgument, period)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil work function", ErrInvalidArgument)
	}
	var o workOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
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
			err := el.c.runWork(ctx, t, fn)
			if err != nil && o.stepDown {
				return err
			}
			now := time.Now()
			if o.fixedDelay {
				next = now.Add(period)
			} else {
				for next = next.Add(period); !next.After(now); next = next.Add(period) {
				}
			}
			timer.Reset(next.Sub(now))
		}
	}
	return el.RunWhileLeader(ctx, loop, opts...)
}

// runWork runs fn, turning a panic into an error, and reports a failure.
func (c *Client) runWork(ctx context.Context, t *Term, fn WorkFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("simba: leader work on %s panicked: %v\n%s", t.name, r, debug.Stack())
		}
		if err != nil && ctx.Err() == nil {
			c.lock()
			c.emit(Event{Kind: EventWorkFailed, Session: t.session, Name: t.name, Token: t.token, Err: err})
			c.unlock()
			c.log.Error("simba: leader work failed", "name", t.name, "token", t.token, "err", err)
		}
	}()
	return fn(ctx, t)
}

// workRunner is the listener behind RunWhileLeader: it runs the work on a
// goroutine of its own for every term.
type workRunner struct {
	el   *Election
	fn   WorkFunc
	opts workOptions
}

func (w *workRunner) OnElected(_ context.Context, t *Term) {
	if !t.addWork() {
		return
	}
	ctx := context.WithValue(t.Context(), workKey{}, t)
	go func() {
		defer t.doneWork()
		err := w.el.c.runWork(ctx, t, w.fn)
		if err != nil && w.opts.stepDown && ctx.Err() == nil {
			_ = w.el.StepDown(ctx, w.opts.cooldown)
		}
	}()
}

func (w *workRunner) OnRevoked(context.Context, *Term, RevokeReason) {}
