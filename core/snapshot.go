package simba

import (
	"sort"
	"time"
)

// Snapshot is a point-in-time view of a client (R-OBS-1).
type Snapshot struct {
	Session SessionSnapshot `json:"session"`
	Leases  []LeaseSnapshot `json:"leases"`
}

// SessionSnapshot describes the client's session.
type SessionSnapshot struct {
	ID        SessionID     `json:"id"`
	Identity  string        `json:"identity"` // the identity the session carries (WithIdentity)
	Status    Status        `json:"status"`
	Remaining time.Duration `json:"remaining"`
	Renew     time.Duration `json:"renewInterval"` // the renew period in effect
	Shortened bool          `json:"leaseShortened"`
}

// LeaseState is what a client does with a name.
type LeaseState string

// The states of an election or lock in a snapshot.
const (
	StateLeader    LeaseState = "LEADER"    // holds a term
	StateCandidate LeaseState = "CANDIDATE" // contends
	StateCooldown  LeaseState = "COOLDOWN"  // stepped down, waits before contending again
	StateIdle      LeaseState = "IDLE"      // known, not contending
)

// LeaseSnapshot describes one election or lock of the client.
type LeaseSnapshot struct {
	Name      string        `json:"name"`
	Kind      string        `json:"kind"` // "election" or "lock"
	State     LeaseState    `json:"state"`
	Token     uint64        `json:"token,omitempty"`
	Remaining time.Duration `json:"remaining"`
	Waiters   int           `json:"waiters,omitempty"` // lock acquisitions waiting on this client
}

// Snapshot returns the session and every election and lock of the client,
// sorted by name.
func (c *Client) Snapshot() Snapshot {
	c.lock()
	defer c.unlock()
	var s Snapshot
	s.Session.Status = c.status
	s.Session.Identity = c.identity
	if c.sess != nil {
		s.Session.ID = c.sess.id
		s.Session.Remaining = max(c.sess.clock.remaining(), 0)
		s.Session.Renew = c.sess.renewPeriod()
		s.Session.Shortened = c.sess.shortened
	}
	now := time.Now()
	for _, e := range c.entries {
		ls := LeaseSnapshot{Name: e.name, Kind: e.kind.String(), State: StateIdle, Waiters: len(e.waiters)}
		switch {
		case e.term != nil:
			ls.State, ls.Token, ls.Remaining = StateLeader, e.term.token, e.term.Remaining()
		case e.kind == kindElection && e.run != nil && now.Before(e.cooldown):
			ls.State = StateCooldown
		case e.wants():
			ls.State = StateCandidate
		}
		s.Leases = append(s.Leases, ls)
	}
	sort.Slice(s.Leases, func(i, j int) bool { return s.Leases[i].Name < s.Leases[j].Name })
	return s
}
