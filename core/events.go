package simba

import (
	"fmt"
	"time"
)

// EventKind says what an Event reports.
type EventKind int

// The events a client publishes (R-OBS-2).
const (
	EventSessionOpened         EventKind = iota + 1 // a new session is live; Granted is its validity
	EventSessionSuspended                           // a keep-alive failed; Err is why
	EventSessionRestored                            // a keep-alive succeeded after failures
	EventSessionDeadlinePassed                      // the local deadline passed: every term revoked
	EventSessionExpired                             // the backend reported the session expired
	EventSessionLeaseShortened                      // the backend granted less than asked (R-DL-5); Granted
	EventSessionClosed                              // the client closed its session
	EventElected                                    // a term was won; Name, Token
	EventRevoked                                    // a term ended; Name, Token, Reason
	EventBackendError                               // a backend call failed; Err, Name when about a lease
	EventWorkFailed                                 // leader work returned an error or panicked; Name, Token, Err (a *WorkError)
	EventListenerPanicked                           // a listener callback panicked; Name, Token, Err
	EventKeepAlive                                  // a keep-alive was answered or failed; Latency, Err (nil on success)
)

var eventNames = [...]string{"", "SessionOpened", "SessionSuspended", "SessionRestored", "SessionDeadlinePassed",
	"SessionExpired", "SessionLeaseShortened", "SessionClosed", "Elected", "Revoked", "BackendError", "WorkFailed",
	"ListenerPanicked", "KeepAlive"}

func (k EventKind) String() string {
	if k <= 0 || int(k) >= len(eventNames) {
		return fmt.Sprintf("EventKind(%d)", int(k))
	}
	return eventNames[k]
}

// MarshalText makes kinds read as their names in JSON and logs.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Event is something that happened to a client's session or leases.
type Event struct {
	Kind    EventKind
	Time    time.Time
	Session SessionID
	Name    string        // the lease, for Elected, Revoked and some BackendError
	Token   uint64        // the term's token, for Elected and Revoked
	Reason  RevokeReason  // for Revoked
	Granted time.Duration // for SessionOpened and SessionLeaseShortened
	Err     error         // for SessionSuspended, SessionExpired, BackendError, WorkFailed, ListenerPanicked, KeepAlive
	Latency time.Duration // for KeepAlive: the round trip of the call
	Waited  time.Duration // for Elected of a lock: how long the winning Acquire or TryAcquire waited
	Lock    bool          // for Elected and Revoked: the term is a lock's, not an election's
}

func (e Event) String() string {
	s := e.Kind.String()
	if e.Session != "" {
		s += " session=" + string(e.Session)
	}
	if e.Name != "" {
		s += fmt.Sprintf(" name=%s token=%d", e.Name, e.Token)
	}
	if e.Lock {
		s += " lock"
	}
	if e.Reason != NotRevoked {
		s += " reason=" + e.Reason.String()
	}
	if e.Granted != 0 {
		s += " granted=" + e.Granted.String()
	}
	if e.Latency != 0 {
		s += " latency=" + e.Latency.String()
	}
	if e.Waited != 0 {
		s += " waited=" + e.Waited.String()
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	return s
}
