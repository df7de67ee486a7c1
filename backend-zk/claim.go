package simbazk

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
)

// claimHold is how long a staged claim waits for the Acquire that takes
// it. The engine asks at once when the release watch fires, or within its
// MinBackoff (100ms by default) when watches fire in quick succession; a
// claim nobody took by then is given back (a won node deleted).
const claimHold = time.Second

// claim is the outcome of a create a session sent on its own when the
// lease node it waits for was deleted, before the engine asked: won (stat
// of the new node) or lost (stat nil, the node existed again).
type claim struct {
	stat  *zk.Stat
	timer *time.Timer
	// tried is set once a give-back sent its delete and it failed: the
	// server may have done it, so the claim's node may be gone and the
	// claim is no longer an answer for an Acquire. Guarded by session.mu.
	tried bool
}

// noteLost records that the session lost an Acquire of name to another
// session: a deletion of the node seen by a release watch of the backend
// then starts the session's next create at once (see [Backend.claimFor]).
// Entries older than the session timeout, which no longer count, are
// dropped whenever the map doubled since the last such pass, so that it
// stays bounded by the names lost within one session timeout.
func (s *session) noteLost(name string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting[name] = now
	if len(s.waiting) <= s.waitingMax {
		return
	}
	stale := time.Duration(s.timeout.Load())
	maps.DeleteFunc(s.waiting, func(_ string, at time.Time) bool { return now.Sub(at) >= stale })
	s.waitingMax = max(minWaitingMax, 2*len(s.waiting))
}

// minWaitingMax is the size of the waiting map below which stale entries
// are left in it.
const minWaitingMax = 64

// takeClaim removes and returns the staged claim of name, if any; nil
// for a claim whose give-back may have deleted its node (see claim.tried),
// which it removes too: the Acquire then reads the node. Call with the
// name's lock held.
func (s *session) takeClaim(name string) *claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.claims[name]
	if c == nil {
		return nil
	}
	delete(s.claims, name)
	c.timer.Stop()
	if c.tried {
		return nil
	}
	return c
}

// claimFor is called when the release watch of name saw its node deleted
// and a caller of WatchRelease still waits. Among the backend's sessions
// that lost an Acquire of name within their session timeout and won none
// since, the one that lost last claims the name: it takes the name's lock
// at once, so that the engine's Acquire, woken by the watch right after,
// waits for the claim and then finds its answer staged and sends nothing;
// the returned function, run after the wake-up, sends the create. It
// returns nil when no session claims. Only one session of a backend
// claims; sessions of other backends do so for their own.
func (b *Backend) claimFor(name string) (send func()) {
	b.mu.Lock()
	all := slices.Collect(maps.Values(b.sessions))
	b.mu.Unlock()
	var best *session
	var bestAt time.Time
	for _, s := range all {
		s.mu.Lock()
		at, ok := s.waiting[name]
		s.mu.Unlock()
		if ok && time.Since(at) < time.Duration(s.timeout.Load()) && at.After(bestAt) {
			best, bestAt = s, at
		}
	}
	if best == nil {
		return nil
	}
	return best.claim(name)
}

// claim takes the lock of name for a claim by the session, unless a call
// of the session on that name is in flight (its outcome makes the claim
// moot), and returns the function that sends the create, stages its
// answer for the next Acquire and gives the lock back; nil when it does
// not claim.
func (s *session) claim(name string) (send func()) {
	unlock, err := s.lockName(context.Background(), name, false)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	_, waiting := s.waiting[name]
	staged := s.claims[name] != nil
	s.mu.Unlock()
	if !waiting || staged || s.expired.Load() {
		unlock()
		return nil
	}
	return func() {
		defer unlock()
		st, err := s.create(s.b.leasePath(name), s.identity)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return // no claim: the engine's Acquire tries itself
		}
		c := &claim{stat: st} // nil stat: another session created the node first
		s.mu.Lock()
		s.claims[name] = c
		s.holdClaim(name, c)
		s.mu.Unlock()
	}
}

// holdClaim gives claim c of name back after claimHold unless an Acquire
// took it by then. Call with s.mu held.
func (s *session) holdClaim(name string, c *claim) {
	c.timer = time.AfterFunc(claimHold, func() { s.b.spawn(func() { s.dropClaim(name, c) }) })
}

// dropClaim gives back claim c of name if no Acquire took it: a won node
// is deleted, so that the lease does not stay held by a session whose
// engine does not know it. The claim stays staged until then, under the
// name's lock: when the lock or the delete cannot be had (the connection
// is down), the give-back is tried again a claimHold later, while the
// session lives (its nodes go with it). The delete is sent only once the
// node was read as the claim's (owner and czxid): a delete that failed
// may have been done, and every lease node is at version 1, so a retry
// must not delete the node another session created since; an Acquire no
// longer takes such a claim as its answer.
func (s *session) dropClaim(name string, c *claim) {
	ctx, cancel := context.WithTimeout(context.Background(), s.responseTimeout())
	defer cancel()
	unlock, err := s.lockName(ctx, name, true)
	if err == nil {
		defer unlock()
		s.mu.Lock()
		staged := s.claims[name] == c
		s.mu.Unlock()
		if staged && c.stat != nil && c.stat.EphemeralOwner == s.zid.Load() {
			err = s.releaseChecked(s.b.leasePath(name), c.stat.Czxid)
			if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
				err = nil // gone, or no longer the claim's node
			}
			if err != nil {
				s.mu.Lock()
				c.tried = true
				s.mu.Unlock()
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.claims[name] != c: // taken by an Acquire
	case err == nil:
		delete(s.claims, name)
	case !s.expired.Load() && !isClosed(s.done):
		s.holdClaim(name, c)
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
