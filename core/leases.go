package simba

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// keepAliveRequest returns what the next keep-alive of s sends: the
// terms held on s, in the map of the last request while they are the
// same, and the names whose outcome is unsure.
func (c *Client) keepAliveRequest(s *session) KeepAliveRequest {
	c.lock()
	defer c.unlock()
	n, same := 0, true
	for name, e := range c.entries {
		if t := e.term; t != nil && t.session == s.id {
			n++
			if tok, ok := s.held[name]; same && (!ok || tok != t.token) {
				same = false
			}
		}
	}
	if !same || n != len(s.held) {
		s.held = make(map[string]uint64, n)
		for name, e := range c.entries {
			if t := e.term; t != nil && t.session == s.id {
				s.held[name] = t.token
			}
		}
		s.heldGen++
	}
	req := KeepAliveRequest{Lease: c.cfg.LeaseDuration, Held: s.held, Generation: s.heldGen}
	for name := range s.unsure {
		req.Unsure = append(req.Unsure, name)
	}
	return req
}

// noteUnsure records that a call of s on name, which gave up at, ended
// without its outcome. Call with the lock held.
func (c *Client) noteUnsure(s *session, name string, at time.Time) {
	if s.ended {
		return
	}
	if s.unsure == nil {
		s.unsure = make(map[string]time.Time)
	}
	if until := at.Add(c.cfg.LeaseDuration); until.After(s.unsure[name]) {
		s.unsure[name] = until
	}
}

// renewed applies the reply to the keep-alive req sent at sentAt. It
// reports false when the session ended instead: the local deadline passed
// before the reply could be applied, so the session ends with
// DeadlinePassed (R-DL-3).
func (c *Client) renewed(s *session, sentAt time.Time, req KeepAliveRequest, reply KeepAliveReply) bool {
	c.lock()
	defer c.unlock()
	if c.sess != s {
		return true
	}
	if !c.applyGrant(s, sentAt, reply.Remaining, false) {
		c.endSessionLocked(s, DeadlinePassed, nil)
		return false
	}
	if c.status != StatusLive {
		c.status = StatusLive
		c.emit(Event{Kind: EventSessionRestored, Session: s.id})
	}
	for _, name := range reply.Lost {
		e := c.entries[name]
		if e == nil || e.term == nil {
			continue
		}
		// Only the term whose token the request carried was checked: a
		// term won after the request was built is not in it, or is there
		// with an older token (tokens strictly increase per name). One won
		// at the instant the keep-alive was sent, but adopted before the
		// request was built, was checked, and is lost.
		if t := e.term; t.session == s.id && req.Held[name] == t.token {
			e.lost(TakenOver) // R-TERM-8
		}
	}
	var busy map[string]bool // reported owned while an attempt or a handover runs
	for name, tok := range reply.Owned {
		switch e := c.entries[name]; {
		case c.closed:
		case e == nil:
			c.releaseAsync(s, name, tok, func() {
				// No entry uses the name: nothing of it to guard any more.
				if c.entries[name] == nil && s.released[name] == tok {
					delete(s.released, name)
				}
			})
		case e.term != nil:
		case e.attempt != nil || e.handingOver:
			// Not while an attempt may still win it, or a handover still
			// holds the lease for its work (R-HO-1): the name stays unsure,
			// and the next keep-alive reports it again.
			if busy == nil {
				busy = make(map[string]bool)
			}
			busy[name] = true
			if _, ok := s.unsure[name]; !ok {
				c.noteUnsure(s, name, sentAt.Add(-c.cfg.LeaseDuration))
			}
		default:
			// An orphan: a win not adopted, or a release that never landed.
			e.release(s, tok)
		}
	}
	for name, until := range s.unsure {
		if !sentAt.Before(until) && !busy[name] {
			delete(s.unsure, name)
		}
	}
	c.groupCounts(s, reply.Groups)
	return true
}

// releaseAsync gives the lease name back at token in the background,
// recording the token first so no later reply of this session adopts it
// (R-CAND-4, R-TERM-7), then runs after, if not nil, with the lock held.
// Nothing is sent for an ended session: it reports whether the release
// started. Call with the lock held.
func (c *Client) releaseAsync(s *session, name string, token uint64, after func()) bool {
	if s.ended {
		return false
	}
	s.noteReleased(name, token)
	c.goBackground(func(ctx context.Context) {
		_ = c.callRelease(ctx, s, name, token)
		if after != nil {
			c.lock()
			defer c.unlock()
			after()
		}
	})
	return true
}

// noteReleased records that the session released name at token.
func (s *session) noteReleased(name string, token uint64) {
	if token > s.released[name] {
		s.released[name] = token
	}
}

// callRelease releases name at token on the backend, bounded by the renew
// period in effect.
func (c *Client) callRelease(ctx context.Context, s *session, name string, token uint64) error {
	cctx := withCallDeadline(ctx, s.renewPeriod())
	defer cctx.stop()
	err := c.b.Release(cctx, s.id, name, token)
	if err != nil && !errors.Is(err, ErrSessionExpired) {
		c.lock()
		c.noteUnsure(s, name, time.Now())
		c.unlock()
	}
	if err != nil {
		c.log.Debug("simba: release failed", "name", name, "token", token, "err", err)
		return fmt.Errorf("simba: release %s token %d: %w", name, token, err)
	}
	return nil
}
