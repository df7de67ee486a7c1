package simba

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Close stops every election and lock of the client, closes the session so
// that the backend frees every lease at once (R-SES-4), and waits for the
// last callbacks. Terms end with Stopped. What ctx bounds:
//
//   - the ordered handover: leader work still running is waited for until
//     it exits or its term's deadline passes (R-HO-1), or until ctx ends.
//     When ctx ends first, Close returns an error matching ctx's, and the
//     handover, the session's close and the last events go on in the
//     background: no lease is released before the work has exited;
//   - not the backend call that closes the session: that gets one renew
//     interval (R-DL-2), even when ctx is already done (a
//     signal.NotifyContext ctx after Ctrl-C) or ends sooner. When the call
//     fails, Close returns its error, and the backend frees the leases when
//     the session expires, one lease duration after its last keep-alive;
//   - the wait for the event listeners, each of which may still have up
//     to WithEventBuffer events to get, and an EventDropped: when
//     ctx ends first, Close returns an error matching ctx's and the
//     listeners get the rest in the background.
//
// So when no leader work runs, Close takes at most one renew interval for
// the session's close, plus what ctx allows for the listeners (see
// docs/adr/0019-what-the-ctx-of-close-and-stop-bounds.md). Called from a
// callback or leader work with the ctx it got, Close does not wait for
// that callback itself (R-CB-5), and does not bound the handover of the
// other terms by that ctx, which ends with the term. Close is idempotent;
// later calls return nil.
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c.lock()
	if c.closed {
		c.unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.status = StatusClosed
	started := c.started
	var working []*Term
	var handovers []chan struct{}
	var attempts []*callContext
	for _, e := range c.entries {
		if e.term != nil {
			working = append(working, e.term)
		}
		if e.handover != nil {
			// A Stop's or StepDown's handover still waits for its work, and
			// queues its term's OnRevoked once it is over.
			working = append(working, e.handover)
			handovers = append(handovers, e.handoverDone)
		}
		if e.attempt != nil {
			attempts = append(attempts, &e.attempt.ctx)
		}
		e.shutdown()
	}
	sess := c.sess
	c.sess = nil
	if sess != nil {
		sess.ended = true
	}
	if started {
		c.emit(Event{Kind: EventSessionClosed, Session: sessionID(sess)})
	}
	c.unlock()

	// Ordered handover: the leader work exits (or its deadline passes)
	// before the session, and with it every lease, is released (R-HO-1).
	// Work that closes the client does not wait for itself (R-CB-5).
	self, own := callbackDispatcher(ctx), workTerm(ctx)
	var busy []*Term
	for _, t := range working {
		if t != own && t.working() {
			busy = append(busy, t)
		}
	}
	finish := func() error {
		for _, t := range busy {
			t.awaitWork(t.clock.deadlineTime())
		}
		c.loopStop()
		for _, a := range attempts {
			a.stop() // the attempts made on callers' goroutines end with the loop's
		}
		if started {
			<-c.loopDone
		}
		var err error
		if sess != nil {
			cctx, cancel := closeCallContext(ctx, sess.renewPeriod())
			if cerr := c.b.CloseSession(cctx, sess.id); cerr != nil {
				err = fmt.Errorf("simba: close session %s: %w", sess.id, cerr)
			}
			cancel()
		}
		c.wg.Wait()
		return err
	}
	var err error
	if len(busy) == 0 || self != nil || own != nil {
		// Nothing to wait for; or called from a callback or leader work,
		// whose ctx ends with the term Close just ended: wait for the
		// handover whatever ctx.
		err = finish()
	} else {
		// Work still runs: the handover may take until the terms'
		// deadline. Close waits for it as long as ctx lets it; past that
		// the handover, the session's close and the last events go on in
		// the background, and the leases are released only once the work
		// has exited or its deadline passed.
		finished := make(chan error, 1)
		go func() {
			err := finish()
			c.lingerEnded()
			finished <- err
		}()
		select {
		case err = <-finished:
		case <-ctx.Done():
			return fmt.Errorf("simba: close: leader work still runs; its handover goes on in the background: %w", ctx.Err())
		}
	}

	if self != nil || own != nil {
		// Called from a callback or leader work: its ctx may end with the
		// term just revoked, and waiting for other callbacks from there
		// could wait for a callback that waits for this one (R-CB-5).
		return err
	}
	c.lingerEnded()
	for _, done := range handovers {
		// The handover queues its OnRevoked before done is closed: wait
		// for that before waiting for the queue to drain.
		select {
		case <-done:
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
	// Every run has ended (shutdown), and every handover has queued its
	// OnRevoked: the last callbacks of the runs are on the dispatchers
	// kept in draining, read only now because a handover's may have been
	// dropped from it as drained before its OnRevoked was queued (another
	// run ending, or this Close ending the others), and added again then.
	c.lock()
	dispatchers := c.draining
	c.draining = nil
	c.unlock()
	for _, l := range c.listeners {
		dispatchers = append(dispatchers, l.d)
	}
	for _, d := range dispatchers {
		select {
		case <-d.idle():
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
	return err
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// closeCallContext bounds the backend call that closes the session at
// Close by one renew interval, as every backend call is (R-DL-2), and by
// nothing else: a ctx that is done already, or ends sooner, does not cut
// the call short, so that a Close after Ctrl-C still frees the leases at
// once (R-SES-4).
func closeCallContext(ctx context.Context, renew time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), renew)
}
