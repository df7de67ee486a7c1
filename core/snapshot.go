package simba

import (
	"encoding/json"
	"sort"
	"time"
)

// Snapshot is a point-in-time view of a client (R-OBS-1). Marshalled as
// JSON, through SnapshotDocument, it is the document that every program of
// this repository prints (docs/snapshot.schema.json).
type Snapshot struct {
	Time    time.Time       `json:"time"` // when it was taken
	Session SessionSnapshot `json:"session"`
	Leases  []LeaseSnapshot `json:"leases"`
}

// SessionSnapshot describes the client's session. Its JSON form has the
// durations in whole milliseconds (remainingMs, renewIntervalMs,
// leaseDurationMs).
type SessionSnapshot struct {
	ID        SessionID     // "" while no session is open
	Identity  string        // the identity the session carries (WithIdentity)
	Status    Status        // OPENING, LIVE, SUSPENDED or CLOSED
	Remaining time.Duration // left before the session's local deadline; 0 without a session
	Renew     time.Duration // the renew period in effect; the configured one while no session is open
	Lease     time.Duration // the lease duration the client asks for (Config.LeaseDuration)
	Shortened bool          // the backend granted a shorter lease than asked for
}

// LeaseState is what a client does with a name. The names fit locks and
// elections alike: a lock is HOLDING once acquired, as an election is once
// this node leads.
type LeaseState string

// The states of an election or lock in a snapshot.
const (
	StateHolding    LeaseState = "HOLDING"    // holds a term: the lock is acquired, or this node leads
	StateContending LeaseState = "CONTENDING" // wants a term: an acquisition waits, or the election contends
	StateCooldown   LeaseState = "COOLDOWN"   // an election that stepped down, waiting before it contends again
	StateIdle       LeaseState = "IDLE"       // known, not contending

	// Deprecated: StateLeader is StateHolding under its former name; its
	// value is now "HOLDING".
	StateLeader = StateHolding
	// Deprecated: StateCandidate is StateContending under its former name;
	// its value is now "CONTENDING".
	StateCandidate = StateContending
)

// LeaseSnapshot describes one election or lock of the client. Its JSON form
// always has every member, token and waiters 0 when there is none, and the
// time left in milliseconds (remainingMs).
type LeaseSnapshot struct {
	Name      string
	Kind      string // "election" or "lock"
	State     LeaseState
	Token     uint64        // the fencing token of the held term; 0 unless HOLDING
	Remaining time.Duration // left in the held term; 0 unless HOLDING
	Waiters   int           // lock acquisitions waiting on this client
}

// SnapshotSchema is the "schema" member of a snapshot's JSON document: the
// name of its shape and its version. The version changes with any change
// that a reader of version 1 could notice, except members added where the
// schema allows them (docs/adr/0029-one-snapshot-schema.md).
const SnapshotSchema = "simba.snapshot/v1"

// SnapshotDocument is the JSON document of a snapshot, as docs/snapshot.schema.json
// defines it: {"schema", "time", "session", "leases"}, the time in RFC 3339
// UTC, every duration in whole milliseconds, leases a list (empty rather
// than null). A program that serves more (simba status its backend, the
// metrics handler its groups) embeds SnapshotDocument in a struct of its
// own with the members the schema names for it, so that the common part
// is encoded here and only here. json.Unmarshal reads a document back into
// a SnapshotDocument, durations to the millisecond.
type SnapshotDocument struct {
	Schema string `json:"schema"` // SnapshotSchema
	Snapshot
}

// Document returns the JSON document of s.
func (s Snapshot) Document() SnapshotDocument {
	s.Time = s.Time.UTC()
	if s.Leases == nil {
		s.Leases = []LeaseSnapshot{}
	}
	return SnapshotDocument{Schema: SnapshotSchema, Snapshot: s}
}

// millis is a duration in whole milliseconds, rounded down: a time left is
// never shown longer than it is.
func millis(d time.Duration) int64 { return d.Milliseconds() }

// sessionJSON and leaseJSON are the schema's session and lease objects.
type sessionJSON struct {
	ID              SessionID `json:"id"`
	Identity        string    `json:"identity"`
	Status          Status    `json:"status"`
	RemainingMs     int64     `json:"remainingMs"`
	RenewIntervalMs int64     `json:"renewIntervalMs"`
	LeaseDurationMs int64     `json:"leaseDurationMs"`
	LeaseShortened  bool      `json:"leaseShortened"`
}

type leaseJSON struct {
	Name        string     `json:"name"`
	Kind        string     `json:"kind"`
	State       LeaseState `json:"state"`
	Token       uint64     `json:"token"`
	RemainingMs int64      `json:"remainingMs"`
	Waiters     int        `json:"waiters"`
}

// MarshalJSON encodes the session as the schema's session object.
func (s SessionSnapshot) MarshalJSON() ([]byte, error) {
	return json.Marshal(sessionJSON{s.ID, s.Identity, s.Status, millis(s.Remaining), millis(s.Renew), millis(s.Lease), s.Shortened})
}

// UnmarshalJSON reads the schema's session object, so that a Go program
// can read the document another node serves.
func (s *SessionSnapshot) UnmarshalJSON(b []byte) error {
	var v sessionJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = SessionSnapshot{
		ID: v.ID, Identity: v.Identity, Status: v.Status, Remaining: time.Duration(v.RemainingMs) * time.Millisecond,
		Renew: time.Duration(v.RenewIntervalMs) * time.Millisecond, Lease: time.Duration(v.LeaseDurationMs) * time.Millisecond,
		Shortened: v.LeaseShortened,
	}
	return nil
}

// MarshalJSON encodes the lease as the schema's lease object.
func (l LeaseSnapshot) MarshalJSON() ([]byte, error) {
	return json.Marshal(leaseJSON{l.Name, l.Kind, l.State, l.Token, millis(l.Remaining), l.Waiters})
}

// UnmarshalJSON reads the schema's lease object.
func (l *LeaseSnapshot) UnmarshalJSON(b []byte) error {
	var v leaseJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = LeaseSnapshot{v.Name, v.Kind, v.State, v.Token, time.Duration(v.RemainingMs) * time.Millisecond, v.Waiters}
	return nil
}

// Snapshot returns the session and every election and lock of the client,
// sorted by name; Leases is empty, not nil, when there is none.
func (c *Client) Snapshot() Snapshot {
	c.lock()
	defer c.unlock()
	now := time.Now()
	s := Snapshot{Time: now, Leases: make([]LeaseSnapshot, 0, len(c.entries))}
	s.Session.Status = c.status
	s.Session.Identity = c.identity
	s.Session.Renew = c.cfg.RenewInterval
	s.Session.Lease = c.cfg.LeaseDuration
	if c.sess != nil {
		s.Session.ID = c.sess.id
		s.Session.Remaining = max(c.sess.clock.remaining(), 0)
		s.Session.Renew = c.sess.renewPeriod()
		s.Session.Shortened = c.sess.shortened
	}
	for _, e := range c.entries {
		ls := LeaseSnapshot{Name: e.name, Kind: e.kind.String(), State: StateIdle, Waiters: len(e.waiters)}
		switch {
		case e.term != nil:
			ls.State, ls.Token, ls.Remaining = StateHolding, e.term.token, e.term.Remaining()
		case e.kind == kindElection && e.run != nil && now.Before(e.cooldown):
			ls.State = StateCooldown
		case e.wants():
			ls.State = StateContending
		}
		s.Leases = append(s.Leases, ls)
	}
	sort.Slice(s.Leases, func(i, j int) bool { return s.Leases[i].Name < s.Leases[j].Name })
	return s
}
