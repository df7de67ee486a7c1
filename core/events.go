package simba

import (
	"context"
	"fmt"
	"sync/atomic"
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
	EventDropped                                    // this listener fell behind and missed Dropped events, the oldest waiting; it comes where they were, before the next event it gets
	EventBackendWarning                             // the backend found a setup that weakens a guarantee; Warning, once per session
)

var eventNames = [...]string{"", "SessionOpened", "SessionSuspended", "SessionRestored", "SessionDeadlinePassed",
	"SessionExpired", "SessionLeaseShortened", "SessionClosed", "Elected", "Revoked", "BackendError", "WorkFailed",
	"ListenerPanicked", "KeepAlive", "Dropped", "BackendWarning"}

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
	Dropped int           // for Dropped: the events this listener missed since its last Dropped
	Warning Warning       // for BackendWarning: what the backend found
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
	if e.Dropped != 0 {
		s += fmt.Sprintf(" dropped=%d", e.Dropped)
	}
	if e.Warning.Code != "" {
		s += " warning=" + e.Warning.String()
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	return s
}

// Events are handed to the listeners' dispatchers at once, up to
// eventBurst deliveries in an eventLinger window; past that, the events of
// the window wait for its end. A client acquiring and releasing at a high
// rate then pays for a few dispatcher tasks per eventLinger, not one per
// event, and an event is never more than eventLinger late.
const (
	eventLinger = time.Millisecond
	eventBurst  = 8
)

// listener is one event listener and the events it has not got yet: the
// chunk of up to drainChunk events its deliver task took (hand), then its
// queue, a ring that grows, doubling, until it fits the client's evBuffer
// events. The two hold at most evBuffer events between them: past that
// many, a new event takes the place of the oldest, in the hand while it
// holds one not yet delivered, else in the ring. So what is dropped is
// always the oldest event waiting, and a listener holds at most evBuffer
// events plus the one it is being handed.
//
// The fields but fn, d, deliver, hand and handPos are guarded by the
// client's evMu. hand is drain's own; handPos is how add skips a hand
// event that drain has not claimed yet.
type listener struct {
	fn      func(context.Context, Event)
	d       *dispatcher // runs deliver, one at a time, in order
	deliver task        // d's one task: drain

	ring      []Event // ring[head:] then ring[:head], n of them, wait
	head, n   int
	dropped   int       // ring events dropped since the last EventDropped
	droppedAt time.Time // the Time of the event whose arrival caused the latest drop
	handLen   int       // the events of hand, claimed or not
	queued    bool      // deliver is queued or running and will look at the ring again

	// handPos packs two counts of the chunk in hand: the low 32 bits count
	// its events claimed, in order, by drain to deliver or by add to drop;
	// the high 32 bits count those add dropped. One word, so that drain
	// learns of a drop in the same step that claims the event after it.
	handPos atomic.Uint64
	hand    [drainChunk]Event // the events drain took, being delivered
}

// drainChunk is how many events drain takes from a queue at a time: one
// lock of the queue per chunk rather than per event, so a listener keeps
// up with an engine that emits an event every few hundred nanoseconds.
// Each listener has a fixed array of that many events (about 10 kB).
const drainChunk = 64

// handSkip is the step of handPos that drops a hand event: one more
// claimed, one more dropped.
const handSkip = 1<<32 | 1

func (c *Client) newListener(fn func(context.Context, Event)) *listener {
	l := &listener{fn: fn, d: newDispatcher(c.exec)}
	l.deliver = task{run: func(ctx context.Context) { c.drain(ctx, l) }}
	return l
}

// add queues e, dropping the oldest event waiting when bound events wait
// already (in the hand and the ring); it reports whether one was dropped.
// The ring's length is a power of two, so that an index wraps with a
// mask.
func (l *listener) add(e Event, bound int) bool {
	inHand := max(l.handLen-int(uint32(l.handPos.Load())), 0)
	dropped := l.n+inHand >= bound
	if dropped && (inHand == 0 || !l.skipHand()) {
		// No hand event left to drop: drain claimed the last ones since
		// they were counted, and they no longer wait. Drop the ring's
		// oldest only if the ring alone holds the bound.
		if dropped = l.n >= bound; dropped {
			l.take()
			l.dropped++
		}
	}
	if dropped {
		l.droppedAt = e.Time
	}
	if l.n == len(l.ring) {
		grown := make([]Event, max(2*len(l.ring), 16))
		copy(grown, l.ring[l.head:])
		copy(grown[len(l.ring)-l.head:], l.ring[:l.head])
		l.ring, l.head = grown, 0
	}
	l.ring[(l.head+l.n)&(len(l.ring)-1)] = e
	l.n++
	return dropped
}

// skipHand drops the oldest event of the hand that drain has not claimed
// yet, and reports false when drain has claimed them all.
func (l *listener) skipHand() bool {
	for {
		p := l.handPos.Load()
		if int(uint32(p)) >= l.handLen {
			return false
		}
		if l.handPos.CompareAndSwap(p, p+handSkip) {
			return true
		}
	}
}

// take removes the oldest event waiting; the queue must not be empty.
func (l *listener) take() Event {
	e := l.ring[l.head]
	l.ring[l.head] = Event{} // drop the error it refers to
	l.head = (l.head + 1) & (len(l.ring) - 1)
	l.n--
	return e
}

// emit publishes an event to the listeners. Call with the lock held. The
// event waits in each listener's queue for its deliver task, which hands
// the listener every event waiting. No event allocates once the queues
// have grown to the size of a burst.
func (c *Client) emit(e Event) {
	if len(c.listeners) == 0 {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	c.evMu.Lock()
	defer c.evMu.Unlock()
	idle := false
	for _, l := range c.listeners {
		if l.add(e, c.evBuffer) {
			c.evDropped.Add(1)
		}
		if l.queued {
			continue
		}
		idle = true
		if c.evArmed && 2*l.n >= c.evBuffer {
			// Half its queue waits for the linger: deliver now, so that a
			// listener that keeps up loses nothing to a burst.
			l.queued = true
			l.d.enqueue(l.deliver)
			c.kickEvents = true
		}
	}
	if !idle || c.evArmed {
		return // a delivery is arranged for every listener
	}
	if e.Time.Sub(c.evWindow) >= eventLinger {
		c.evWindow, c.evBurst = e.Time, 0
	}
	if c.evBurst < eventBurst {
		c.evBurst++
		c.queueDeliveries()
		c.kickEvents = true
		return
	}
	wait := eventLinger - e.Time.Sub(c.evWindow)
	c.evArmed = true
	if c.evTimer == nil {
		c.evTimer = time.AfterFunc(wait, c.lingerEnded)
		return
	}
	c.evTimer.Reset(wait)
}

// queueDeliveries queues the deliver task of every listener that has none.
// Call with evMu held; kick the dispatchers after.
func (c *Client) queueDeliveries() {
	for _, l := range c.listeners {
		if !l.queued && l.n > 0 {
			l.queued = true
			l.d.enqueue(l.deliver)
		}
	}
}

// kickListeners starts the deliveries queued.
func (c *Client) kickListeners() {
	for _, l := range c.listeners {
		l.d.kick()
	}
}

// lingerEnded hands the events waiting to the listeners: the end of a
// burst's wait, or Close.
func (c *Client) lingerEnded() {
	c.evMu.Lock()
	if !c.evArmed {
		c.evMu.Unlock()
		return
	}
	c.evArmed = false
	c.evTimer.Stop()
	c.evWindow, c.evBurst = time.Now(), 1
	c.queueDeliveries()
	c.evMu.Unlock()
	c.kickListeners()
}

// drain is a listener's deliver task: it hands the listener the events
// waiting, oldest first, until its queue is empty. It takes them
// drainChunk at a time. Every event dropped is older than every event
// still waiting, so the EventDropped that counts the drops comes right
// before the next event the listener gets: at the start of a chunk for
// the drops from the ring, before the next event of the chunk for the
// drops from the hand, and with the ring's for the drops that end the
// hand, so that two EventDropped never come in a row. A new event queued meanwhile is taken by the same
// run, so a listener has at most one deliver task at a time.
func (c *Client) drain(ctx context.Context, l *listener) {
	for {
		c.evMu.Lock()
		if l.dropped > 0 {
			dropped, at := l.dropped, l.droppedAt
			l.dropped = 0
			c.evMu.Unlock()
			c.reportDropped(ctx, l, dropped, at)
			continue
		}
		if l.n == 0 {
			l.queued = false
			l.handLen = 0
			l.handPos.Store(0)
			c.evMu.Unlock()
			return
		}
		k := 0
		for ; k < len(l.hand) && l.n > 0; k++ {
			l.hand[k] = l.take()
		}
		l.handLen = k
		l.handPos.Store(0)
		c.evMu.Unlock()
		reported := 0
		for {
			p := l.handPos.Add(1)
			i := int(uint32(p)) - 1
			skipped := int(p >> 32)
			if i >= k {
				if skipped > reported {
					// The drops end the chunk: the next event the listener
					// gets is the ring's, so count them with the ring's
					// drops, in one EventDropped before it.
					c.evMu.Lock()
					l.dropped += skipped - reported
					c.evMu.Unlock()
				}
				break
			}
			if skipped > reported {
				c.evMu.Lock()
				at := l.droppedAt
				c.evMu.Unlock()
				c.reportDropped(ctx, l, skipped-reported, at)
				reported = skipped
			}
			c.callListener(ctx, l.fn, l.hand[i])
		}
		clear(l.hand[:k]) // drop the errors they refer to
	}
}

// reportDropped hands l an EventDropped of n events, at the Time of the
// event whose arrival caused the latest drop, and logs a warning at most
// once per dropWarnEvery.
func (c *Client) reportDropped(ctx context.Context, l *listener, n int, at time.Time) {
	if c.dropWarning(at) {
		c.log.Warn("simba: an event listener fell behind; its oldest events were dropped",
			"dropped", n, "total", c.EventsDropped(), "buffer", c.evBuffer)
	}
	c.callListener(ctx, l.fn, Event{Kind: EventDropped, Time: at, Dropped: n})
}

// dropWarnEvery is the least time between two warnings about dropped
// events: a listener that keeps falling behind logs once a minute, not
// each time it catches up.
const dropWarnEvery = time.Minute

// dropWarning reports whether to log the drops reported at now.
func (c *Client) dropWarning(now time.Time) bool {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if !c.evWarned.IsZero() && now.Sub(c.evWarned) < dropWarnEvery {
		return false
	}
	c.evWarned = now
	return true
}

// callListener runs one event listener, recovering a panic so that the
// listener still gets the next events.
func (c *Client) callListener(ctx context.Context, fn func(context.Context, Event), e Event) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("simba: event listener panicked", "event", e.Kind.String(), "err", fmt.Errorf("panic: %v", r))
		}
	}()
	fn(ctx, e)
}

// EventsDropped returns how many events the client dropped because a
// listener had fallen WithEventBuffer events behind, every listener
// counted, since New.
func (c *Client) EventsDropped() uint64 { return c.evDropped.Load() }
