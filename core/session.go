package simba

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// session is one session incarnation as the engine sees it.
type session struct {
	id        SessionID
	clock     *sessionClock
	renew     atomic.Int64      // the renew period in effect (R-DL-2, R-DL-5), read without the lock
	released  map[string]uint64 // highest token released per name (R-CAND-4)
	shortened bool              // SessionLeaseShortened published
	ended     bool
	// held is the Held of the last keep-alive request, never changed once
	// sent, and heldGen its Generation.
	held    map[string]uint64
	heldGen uint64
	// unsure maps each name a call of the session ended on without its
	// outcome to the time from which a keep-alive sent settles it: a lease
	// after the call gave up, since the call may still commit on the
	// server until then (KeepAliveRequest.Unsure).
	unsure map[string]time.Time
}

func (s *session) renewPeriod() time.Duration { return time.Duration(s.renew.Load()) }

func sessionID(s *session) SessionID {
	if s == nil {
		return ""
	}
	return s.id
}

// run is the session loop: it opens a session, keeps it alive until it
// ends, and opens the next, until Close.
func (c *Client) run() {
	defer close(c.loopDone)
	for {
		sess := c.open()
		if sess == nil {
			return
		}
		if !c.keepAlive(sess) {
			return
		}
	}
}

// open opens a session, retrying with growing backoff, and installs it.
// It returns nil when the client is closing.
func (c *Client) open() *session {
	backoff := c.cfg.MinBackoff
	for {
		sentAt := time.Now()
		ctx, cancel := context.WithTimeout(c.loopCtx, c.cfg.RenewInterval)
		grant, err := c.openSession(ctx)
		cancel()
		if c.loopCtx.Err() != nil {
			if err == nil {
				c.closeAbandoned(grant.ID)
			}
			return nil
		}
		if err == nil {
			s := &session{id: grant.ID, clock: newSessionClock(), released: make(map[string]uint64)}
			c.lock()
			if c.closed {
				c.unlock()
				c.closeAbandoned(grant.ID)
				return nil
			}
			c.applyGrant(s, sentAt, grant.Remaining, true)
			if s.clock.remaining() > 0 {
				c.sess = s
				c.status = StatusLive
				c.emit(Event{Kind: EventSessionOpened, Session: s.id, Granted: grant.Remaining})
				c.log.Debug("simba: session opened", "session", s.id, "granted", grant.Remaining)
				c.warnSetup(s.id, grant.Warnings)
				for _, e := range c.entries {
					e.contend()
				}
				for _, gs := range c.groups {
					gs.members = 0 // unknown until the new session joins
					c.join(s, gs)
				}
				c.unlock()
				return s
			}
			c.unlock()
			c.closeAbandoned(grant.ID)
			err = fmt.Errorf("simba: session %s granted %v, too short to use", grant.ID, grant.Remaining)
		}
		c.log.Debug("simba: open session failed", "err", err)
		c.lock()
		c.emit(Event{Kind: EventBackendError, Err: err})
		c.unlock()
		if !c.sleep(backoff) {
			return nil
		}
		backoff = min(backoff*2, c.cfg.RenewInterval)
	}
}

// warnSetup logs and publishes the setup warnings of a new session's
// grant, each distinct one once. Call with the lock held.
func (c *Client) warnSetup(id SessionID, warnings []Warning) {
	for i, w := range warnings {
		if slices.Contains(warnings[:i], w) {
			continue
		}
		c.emit(Event{Kind: EventBackendWarning, Session: id, Warning: w})
		c.log.Warn("simba: the backend warns about its setup", "session", id, "code", w.Code, "warning", w.Message)
	}
}

// openSession opens a session carrying the client's identity where the
// backend stores one.
func (c *Client) openSession(ctx context.Context) (SessionGrant, error) {
	if o, ok := c.b.(IdentityOpener); ok {
		return o.OpenSessionAs(ctx, c.cfg.LeaseDuration, c.identity)
	}
	return c.b.OpenSession(ctx, c.cfg.LeaseDuration)
}

// closeAbandoned closes a session nobody will use, best effort.
func (c *Client) closeAbandoned(id SessionID) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewInterval)
	defer cancel()
	_ = c.b.CloseSession(ctx, id)
}

// sleep waits d, and reports false when the client closes first.
func (c *Client) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.loopCtx.Done():
		return false
	}
}

// applyGrant applies R-DL-1 and R-DL-5 to a grant of remaining measured
// from a call sent at sentAt: the first grant of a new session when first
// is set, a renewal otherwise. A renewal never moves a deadline that has
// passed (R-DL-3); applyGrant then reports false. Call with the lock held.
func (c *Client) applyGrant(s *session, sentAt time.Time, remaining time.Duration, first bool) bool {
	local := c.cfg.localValidity(remaining)
	if first {
		s.clock.start(sentAt.Add(local))
	} else if !s.clock.extend(sentAt.Add(local)) {
		return false
	}
	s.renew.Store(int64(c.cfg.RenewInterval))
	if remaining < c.cfg.LeaseDuration && 2*c.cfg.RenewInterval > local {
		s.renew.Store(int64(max(local/3, time.Millisecond)))
		if !s.shortened {
			s.shortened = true
			c.emit(Event{Kind: EventSessionLeaseShortened, Session: s.id, Granted: remaining})
			c.log.Warn("simba: backend granted a shorter lease than asked; renewing every third of it",
				"session", s.id, "asked", c.cfg.LeaseDuration, "granted", remaining, "renew", s.renewPeriod())
		}
	}
	return true
}

// keepAlive renews s until it ends. It reports false when the client is
// closing, true when s ended and a new session is needed.
func (c *Client) keepAlive(s *session) bool {
	next := time.Now().Add(s.renewPeriod())
	for {
		deadline := s.clock.deadlineTime()
		wake := next
		if deadline.Before(wake) {
			wake = deadline
		}
		if !c.sleep(time.Until(wake)) {
			return false
		}
		if !time.Now().Before(deadline) {
			c.endSession(s, DeadlinePassed, nil)
			return true
		}
		sentAt := time.Now()
		callEnd := sentAt.Add(s.renewPeriod())
		if deadline.Before(callEnd) {
			callEnd = deadline
		}
		req := c.keepAliveRequest(s)
		ctx, cancel := context.WithDeadline(c.loopCtx, callEnd)
		reply, err := c.b.KeepAlive(ctx, s.id, req)
		cancel()
		now := time.Now()
		if c.loopCtx.Err() != nil {
			return false
		}
		if len(c.listeners) > 0 {
			c.lock()
			c.emit(Event{Kind: EventKeepAlive, Session: s.id, Latency: now.Sub(sentAt), Err: err})
			c.unlock()
		}
		switch {
		case !now.Before(deadline):
			// A late reply never extends a passed deadline (R-DL-3).
			c.endSession(s, DeadlinePassed, err)
			return true
		case errors.Is(err, ErrSessionExpired):
			c.endSession(s, SessionExpired, err)
			return true
		case err != nil:
			wait := min(max(deadline.Sub(now)/2, c.cfg.MinBackoff), c.cfg.RenewInterval)
			next = now.Add(wait)
			c.suspend(s, err)
		default:
			if hook := testHookKeepAliveReply.Load(); hook != nil {
				(*hook)()
			}
			if !c.renewed(s, sentAt, req, reply) {
				return true // the deadline passed before the renewal was applied
			}
			next = sentAt.Add(s.renewPeriod())
		}
	}
}

// suspend records a failed keep-alive (R-DL-4).
func (c *Client) suspend(s *session, err error) {
	c.lock()
	defer c.unlock()
	if c.sess != s {
		return
	}
	if c.status != StatusSuspended {
		c.status = StatusSuspended
		c.emit(Event{Kind: EventSessionSuspended, Session: s.id, Err: err})
		c.log.Info("simba: keep-alive failed, session suspended", "session", s.id, "err", err)
	}
}

// testHookKeepAliveReply, when set by a test, runs between the receipt of a
// keep-alive reply and its application: the one window a fake backend
// cannot open (docs/adr/0034-java-shaped-parts-weighed.md).
var testHookKeepAliveReply atomic.Pointer[func()]

// endSession ends s: every term of it is revoked with reason, and the loop
// opens a new session.
func (c *Client) endSession(s *session, reason RevokeReason, cause error) {
	c.lock()
	defer c.unlock()
	c.endSessionLocked(s, reason, cause)
}

// endSessionLocked is endSession with the lock held.
func (c *Client) endSessionLocked(s *session, reason RevokeReason, cause error) {
	if c.sess != s {
		return
	}
	s.ended = true
	c.sess = nil
	c.status = StatusOpening
	for _, e := range c.entries {
		if e.term != nil && e.term.session == s.id {
			e.lost(reason)
		}
	}
	kind := EventSessionExpired
	if reason == DeadlinePassed {
		kind = EventSessionDeadlinePassed
		// The backend may still hold the session: free its leases sooner.
		c.goBackground(func(context.Context) { c.closeAbandoned(s.id) })
	}
	c.emit(Event{Kind: kind, Session: s.id, Err: cause})
	c.log.Warn("simba: session ended, every term revoked", "session", s.id, "reason", reason, "err", cause)
}

// sessionClock is the local deadline of one session incarnation, on the
// monotonic clock: nanoseconds since base. Terms read it on every call to
// Valid and Remaining, so validity needs no watchdog (R-TERM-3).
//
// Once the deadline has passed it is sealed: a reader that finds it passed
// marks it so, and a renewal can extend only a deadline that is neither
// sealed nor passed, in one compare-and-swap. So a term that read invalid
// never reads valid again, whatever a late renewal does (R-DL-3, R-TERM-4).
type sessionClock struct {
	base     time.Time
	deadline atomic.Int64
}

// sealed is the deadline of a clock whose deadline has passed.
const sealed = math.MinInt64

func newSessionClock() *sessionClock { return &sessionClock{base: time.Now()} }

// remaining returns the time left before the deadline, or a value <= 0,
// sealing the clock when the deadline has passed.
// A passed deadline is reported only once it is sealed, so that no
// renewal can move it after a reader saw it passed.
func (s *sessionClock) remaining() time.Duration { return s.left(time.Since(s.base)) }

// remainingAt is remaining at now, a reading of the clock just taken: for
// a caller that has one, as it costs no second reading.
func (s *sessionClock) remainingAt(now time.Time) time.Duration { return s.left(now.Sub(s.base)) }

// left is remaining once elapsed has passed since base.
func (s *sessionClock) left(elapsed time.Duration) time.Duration {
	for {
		d := s.deadline.Load()
		if d == sealed {
			return 0
		}
		if r := time.Duration(d) - elapsed; r > 0 {
			return r
		}
		if s.deadline.CompareAndSwap(d, sealed) {
			return 0
		}
	}
}

// start sets the first deadline of a new session.
func (s *sessionClock) start(t time.Time) { s.deadline.Store(int64(t.Sub(s.base))) }

// extend moves the deadline to t unless it has passed; it reports false,
// and seals the clock, when it has.
func (s *sessionClock) extend(t time.Time) bool {
	for {
		d := s.deadline.Load()
		if d == sealed || time.Duration(d) <= time.Since(s.base) {
			s.deadline.CompareAndSwap(d, sealed)
			return false
		}
		if s.deadline.CompareAndSwap(d, int64(t.Sub(s.base))) {
			return true
		}
	}
}

// deadlineTime returns the deadline; for a sealed clock, a time in the past.
func (s *sessionClock) deadlineTime() time.Time {
	d := s.deadline.Load()
	if d == sealed {
		return s.base
	}
	return s.base.Add(time.Duration(d))
}
