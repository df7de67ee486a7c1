package simba

import (
	"context"
	"fmt"
	"time"
)

// Listener receives the terms of an election. Callbacks of one election run
// one at a time, in order, never under an internal lock (R-CB-2); every
// OnElected is followed by exactly one OnRevoked for the same term
// (R-CB-1). The ctx they get marks them as callbacks: pass it to Stop,
// StepDown or Client.Close called from there, and those will not wait for
// the callback itself (R-CB-5). The ctx of OnElected also ends with the
// term.
type Listener interface {
	OnElected(ctx context.Context, t *Term)
	OnRevoked(ctx context.Context, t *Term, reason RevokeReason)
}

// ListenerFuncs adapts two functions to a Listener; a nil function is
// skipped.
type ListenerFuncs struct {
	Elected func(ctx context.Context, t *Term)
	Revoked func(ctx context.Context, t *Term, reason RevokeReason)
}

// OnElected calls f.Elected.
func (f ListenerFuncs) OnElected(ctx context.Context, t *Term) {
	if f.Elected != nil {
		f.Elected(ctx, t)
	}
}

// OnRevoked calls f.Revoked.
func (f ListenerFuncs) OnRevoked(ctx context.Context, t *Term, reason RevokeReason) {
	if f.Revoked != nil {
		f.Revoked(ctx, t, reason)
	}
}

// Election is a role one node of many plays at a time: while started, the
// client contends for the lease of its name and reports every term it wins
// to the listener. Elections of one name on one client share their state;
// an Election value is cheap and safe for concurrent use.
type Election struct {
	c    *Client
	name string
}

// electionRun is one Start..Stop of an election.
type electionRun struct {
	l     Listener
	d     *dispatcher
	ended chan struct{} // closed when the run ends: Stop, or the client's Close
}

func newElectionRun(c *Client, l Listener) *electionRun {
	return &electionRun{l: l, d: newDispatcher(c.exec), ended: make(chan struct{})}
}

// endRun ends the entry's election run, if any; its dispatcher is kept
// for Close until its last callbacks ran. Call with the lock held.
func (e *entry) endRun() {
	if e.run != nil {
		close(e.run.ended)
		e.c.noteDraining(e.run.d)
		e.run = nil
	}
}

// noteDraining keeps d, the dispatcher of an ended run, among those Close
// waits for, and drops the ones already drained. Call with the lock held.
func (c *Client) noteDraining(d *dispatcher) {
	kept := c.draining[:0]
	for _, x := range c.draining {
		if x != d && !x.isDrained() {
			kept = append(kept, x)
		}
	}
	clear(c.draining[len(kept):])
	c.draining = append(kept, d)
}

// Election returns the election of name. The name is checked by Start.
func (c *Client) Election(name string) *Election { return &Election{c: c, name: name} }

// Name returns the lease name of the election.
func (el *Election) Name() string { return el.name }

// Start starts contending for the lease and reporting terms to l. It fails
// with a *NameError for an invalid name (before any backend call),
// ErrAlreadyStarted when the election is already started on this client
// (R-CB-4), ErrNameInUse when a lock of this client uses the name, and
// ErrClosed after Close.
func (el *Election) Start(l Listener) error {
	_, err := el.start(l)
	return err
}

// start is Start, returning the run it started.
func (el *Election) start(l Listener) (*electionRun, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: nil listener", ErrInvalidArgument)
	}
	if err := ValidateName(el.name); err != nil {
		return nil, err
	}
	c := el.c
	c.lock()
	defer c.unlock()
	e, err := c.entryFor(el.name, kindElection)
	if err != nil {
		return nil, err
	}
	if e.run != nil {
		return nil, fmt.Errorf("%w: %s", ErrAlreadyStarted, el.name)
	}
	run := newElectionRun(c, l)
	e.run = run
	e.cooldown = time.Time{}
	e.contend()
	return run, nil
}

// Term returns the current term of the election on this client, or nil.
func (el *Election) Term() *Term {
	c := el.c
	c.lock()
	defer c.unlock()
	if e := c.entries[el.name]; e != nil && e.kind == kindElection {
		return e.term
	}
	return nil
}

// Stop ends the election: it revokes the current term (Stopped), releases
// the lease, delivers the last OnRevoked, and returns once that callback
// ran (R-HO-1, R-CB-3); after that the listener receives nothing more. An
// acquire still in flight is waited for (at most a renew period) and what
// it wins is given back, so this node holds nothing of the name once Stop
// returns.
// Cancelling ctx stops the waiting, not the stop: when ctx ends first,
// Stop returns an error matching ctx's, and the handover (the work's
// exit, the release, OnRevoked) goes on in the background. Called from a
// callback of the election, Stop does not wait for that callback, and no
// callback queued behind it comes, but the OnRevoked of a term whose
// OnElected was delivered (R-CB-1). It fails with ErrNotStarted when the
// election is not started.
func (el *Election) Stop(ctx context.Context) error {
	return el.end(ctx, Stopped, 0, nil, nil)
}

// StepDown gives the current term up (SteppedDown) in the same order as
// Stop, but keeps the election started: it contends again once cooldown
// has passed, counted from the step-down (R-HO-4). It fails with
// ErrNotStarted when the election is not started and ErrInvalidArgument
// for a negative cooldown.
func (el *Election) StepDown(ctx context.Context, cooldown time.Duration) error {
	if cooldown < 0 {
		return fmt.Errorf("%w: negative cooldown %v", ErrInvalidArgument, cooldown)
	}
	return el.end(ctx, SteppedDown, cooldown, nil, nil)
}

// end stops the election (reason Stopped) or steps it down. With a
// non-nil only, it ends that run only; with a non-nil term, it steps down
// from that term only, and does nothing when the election holds another
// term or none.
func (el *Election) end(ctx context.Context, reason RevokeReason, cooldown time.Duration, only *electionRun, term *Term) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	c := el.c
	c.lock()
	e := c.entries[el.name]
	if e == nil || e.kind != kindElection || e.run == nil {
		closed := c.closed
		c.unlock()
		if closed {
			return ErrClosed
		}
		return fmt.Errorf("%w: %s", ErrNotStarted, el.name)
	}
	if only != nil && e.run != only || term != nil && e.term != term {
		c.unlock()
		return nil
	}
	run := e.run
	e.abandon()
	// An acquire in flight may still win: it is not kept, and the stop
	// returns once it was given back, as it does for an earlier win that
	// was not kept, so the name is free when it returns.
	quiet := e.awaitQuiet()
	if reason == Stopped {
		e.endRun()
	} else {
		e.cooldown = time.Now().Add(cooldown)
	}
	t := e.term
	e.term = nil
	// mine is closed once this call's handover is over; prev is that of an
	// earlier Stop or StepDown still handing its term over.
	var mine, prev chan struct{}
	if t != nil {
		// No new term until this one's OnRevoked is queued, so callbacks
		// stay paired and in order (R-CB-1, R-CB-2).
		mine = make(chan struct{})
		e.handingOver, e.handover, e.handoverDone = true, t, mine
	} else if e.handingOver {
		prev = e.handoverDone
	}
	var deadline time.Time
	if t != nil {
		deadline = t.clock.deadlineTime()
	}
	var release releaseCall
	if t != nil && t.revoke(reason) {
		c.emit(Event{Kind: EventRevoked, Session: t.session, Name: e.name, Token: t.token, Reason: reason})
		release = e.releaseNow(t)
	} else {
		t = nil
	}
	c.unlock()

	// settle hands the term over and lets the election contend again; it
	// returns a channel closed once the callbacks queued before it ran.
	settle := func() <-chan struct{} {
		if t != nil {
			// Ordered handover: revoked (the work's ctx is cancelled), the
			// work exited or the deadline at the stop passed, released, then
			// OnRevoked (R-HO-1/2). Work that stops its own election is not
			// waited for (R-CB-5). The release is bounded by the renew
			// period.
			if workTerm(ctx) != t {
				t.awaitWork(deadline)
			}
			if err := release.do(context.Background()); err != nil {
				c.lock()
				c.emit(Event{Kind: EventBackendError, Name: el.name, Err: err})
				c.unlock()
			}
			run.d.push(e.revokedTask(run, t, reason))
		}
		done := run.d.barrier()
		c.lock()
		if t != nil && e.run != run {
			// The run ended meanwhile (this Stop, or a later one): its
			// dispatcher may have been dropped as drained before the
			// OnRevoked was queued, so Close is told of it again.
			c.noteDraining(run.d)
		}
		if mine != nil {
			// Only the call that began the handover ends it: a later Stop
			// or StepDown, with no term of its own, leaves it running.
			e.handingOver, e.handover, e.handoverDone = false, nil, nil
			close(mine)
		}
		// Contend again, at the end of a step-down's cooldown: the run
		// stepped down, or one started, or a lock waiter queued, during
		// the handover, which made no attempt while it ran.
		if e.run != nil && time.Now().Before(e.cooldown) {
			e.scheduleRetry(time.Until(e.cooldown))
		} else {
			e.contend()
		}
		e.forget()
		c.unlock()
		return done
	}
	if callbackDispatcher(ctx) == run.d || workTerm(ctx) == t && t != nil {
		// Called from this election's callback or work: its ctx may end
		// with the term, and its callback is not waited for.
		settle()
		return nil
	}
	var done <-chan struct{}
	if t == nil {
		done = settle()
	} else {
		// The handover waits for work and the backend: bounded by ctx, and
		// finished in the background when ctx ends first.
		settled := make(chan (<-chan struct{}), 1)
		go func() { settled <- settle() }()
		select {
		case done = <-settled:
		case <-ctx.Done():
			verb := "stop"
			if reason == SteppedDown {
				verb = "step down"
			}
			return fmt.Errorf("simba: %s %s: the handover goes on in the background: %w", verb, el.name, ctx.Err())
		}
	}
	if prev != nil {
		// An earlier Stop or StepDown still hands its term over: return
		// once that term's OnRevoked ran too (R-CB-3).
		select {
		case <-prev:
		case <-ctx.Done():
			return ctx.Err()
		}
		done = run.d.barrier()
	}
	for _, ch := range []<-chan struct{}{done, quiet} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// elected hands a new term to the listener. Call with the lock held.
func (e *entry) elected(t *Term) {
	c := e.c
	run := e.run
	run.d.enqueue(task{
		run: func(ctx context.Context) {
			select {
			case <-run.ended:
				// Stopped (or closed) before the term's OnElected ran:
				// neither it nor the term's OnRevoked is delivered, so a
				// Stop from a callback ends the callbacks (R-CB-1).
				t.muted.Store(true)
				return
			default:
			}
			run.l.OnElected(context.WithValue(t.Context(), callbackKey{}, run.d), t)
		},
		rejected: func() { e.electedRejected(t) },
		panicked: func(err error) { e.listenerPanicked(run, t, "OnElected", err) },
	})
	c.after(run.d.kick)
}

// electedRejected handles an OnElected the executor refused (R-CB-6):
// nobody learns of the term, so the election steps down for one lease
// duration and the term's OnRevoked is not delivered either.
func (e *entry) electedRejected(t *Term) {
	c := e.c
	t.muted.Store(true)
	c.lock()
	defer c.unlock()
	if e.run != nil {
		e.cooldown = time.Now().Add(c.cfg.LeaseDuration)
		e.abandon()
		e.scheduleRetry(c.cfg.LeaseDuration)
	}
	if e.term == t {
		e.term = nil
		if t.revoke(SteppedDown) {
			c.emit(Event{Kind: EventRevoked, Session: t.session, Name: e.name, Token: t.token, Reason: SteppedDown})
			rel := e.releaseNow(t)
			c.goBackground(func(ctx context.Context) { _ = rel.do(ctx) })
		}
	}
}

// revokedElection queues the OnRevoked of a term lost without waiting.
// Call with the lock held.
func (e *entry) revokedElection(t *Term, reason RevokeReason) {
	run := e.run
	if run == nil {
		return
	}
	run.d.enqueue(e.revokedTask(run, t, reason))
	e.c.after(run.d.kick)
}

func (e *entry) revokedTask(run *electionRun, t *Term, reason RevokeReason) task {
	return task{
		run: func(ctx context.Context) {
			if !t.muted.Load() {
				run.l.OnRevoked(ctx, t, reason)
			}
		},
		panicked: func(err error) { e.listenerPanicked(run, t, "OnRevoked", err) },
	}
}

// listenerPanicked reports a listener callback of term t that panicked
// (EventListenerPanicked and an error log line). After a panic in
// OnElected the election steps down from t for one lease duration, as
// after a rejected OnElected: a listener that failed to take the term up
// must not keep the lease idle. That term's OnRevoked is delivered as
// usual (R-CB-1). It runs on the dispatcher, as the callback did.
func (e *entry) listenerPanicked(run *electionRun, t *Term, callback string, err error) {
	c := e.c
	c.lock()
	c.emit(Event{Kind: EventListenerPanicked, Session: t.session, Name: e.name, Token: t.token, Err: err})
	c.unlock()
	c.log.Error("simba: listener panicked", "callback", callback, "name", e.name, "token", t.token, "err", err)
	if callback == "OnElected" {
		// The dispatcher's ctx marks this call as the callback's own, so the
		// step-down does not wait for the queue it runs on (R-CB-5).
		_ = c.Election(e.name).end(run.d.ctx, SteppedDown, c.cfg.LeaseDuration, run, t)
	}
}
