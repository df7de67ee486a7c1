package capi

import (
	"context"
	"fmt"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// DefaultEventCapacity is the number of events a stream keeps for its
// reader when the subscription gives no capacity (0).
const DefaultEventCapacity = 1024

// MaxEventCapacity is the largest capacity of a stream: about 140 MB of
// events at most, for a reader that stopped reading.
const MaxEventCapacity = 1 << 20

// eventHub hands the events of one client to its streams. Its publish is
// the client's one event listener: it queues each event on every stream
// and never waits for a reader (docs/adr/0016-bounded-event-queues.md,
// docs/adr/0031-engine-features-in-the-c-api.md).
type eventHub struct {
	mu      sync.Mutex
	streams map[*eventStream]struct{}
	ended   bool // the client's close ended: no event comes any more
}

func newEventHub() *eventHub { return &eventHub{streams: make(map[*eventStream]struct{})} }

// publish queues e on every stream of the client; it is the listener of
// simba.WithEventListener and runs on the engine's dispatcher.
func (h *eventHub) publish(_ context.Context, e simba.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.streams {
		s.push(e)
	}
}

// end marks every stream as ended once the client's close ended: a reader
// gets what is still queued, then the end.
func (h *eventHub) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = true
	for s := range h.streams {
		s.finish()
	}
}

func (h *eventHub) add(s *eventStream) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return false
	}
	h.streams[s] = struct{}{}
	return true
}

func (h *eventHub) remove(s *eventStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.streams, s)
}

// eventStream is one subscription: a queue of at most capacity events
// that drops its oldest when full, and counts what it dropped for the
// reader.
type eventStream struct {
	hub  *eventHub
	wake chan struct{} // one token: an event, the end or a free came

	mu        sync.Mutex
	ring      []simba.Event // ring[head:] then ring[:head], n of them
	head, n   int
	capacity  int
	dropped   int       // events dropped since the reader last heard of it
	droppedAt time.Time // the Time of the event whose arrival dropped the latest one
	total     uint64    // events dropped since the subscription
	ended     bool      // the client's close ended
	freed     bool      // FreeEvents was called
}

// push queues e, dropping the oldest event when the queue is full. An
// EventDropped of the engine (its own queue fell behind) counts its
// events among the stream's: dropped in turn, it passes its count on to
// the stream's next EventDropped, so that the counts a reader gets always
// add up to EventsDropped.
func (s *eventStream) push(e simba.Event) {
	s.mu.Lock()
	if e.Kind == simba.EventDropped {
		s.total += uint64(max(e.Dropped, 0))
	}
	if s.n == s.capacity {
		old := s.ring[s.head]
		s.ring[s.head] = simba.Event{}
		s.head = (s.head + 1) % len(s.ring)
		s.n--
		if old.Kind == simba.EventDropped {
			s.dropped += old.Dropped
		} else {
			s.dropped++
			s.total++
		}
		s.droppedAt = e.Time
	}
	if s.n == len(s.ring) {
		grown := make([]simba.Event, min(max(2*len(s.ring), 16), s.capacity))
		copy(grown, s.ring[s.head:])
		copy(grown[len(s.ring)-s.head:], s.ring[:s.head])
		s.ring, s.head = grown, 0
	}
	s.ring[(s.head+s.n)%len(s.ring)] = e
	s.n++
	s.mu.Unlock()
	s.signal()
}

func (s *eventStream) finish() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.signal()
}

func (s *eventStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pop returns the next event: an EventDropped first when events were
// dropped since the last one the reader got (all of them older than what
// still waits), then the oldest waiting. ok is false when none waits;
// then err tells whether the stream ended.
func (s *eventStream) pop() (e simba.Event, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.freed:
		s.signal() // for another reader of the same stream
		return e, false, fmt.Errorf("%w: the event stream was freed", ErrBadHandle)
	case s.dropped > 0:
		e = simba.Event{Kind: simba.EventDropped, Time: s.droppedAt, Dropped: s.dropped}
		s.dropped = 0
	case s.n > 0:
		e = s.ring[s.head]
		s.ring[s.head] = simba.Event{}
		s.head = (s.head + 1) % len(s.ring)
		s.n--
	case s.ended:
		s.signal()
		return e, false, fmt.Errorf("event stream: %w: the client is closed and every event was read", simba.ErrClosed)
	default:
		return e, false, nil
	}
	if s.n > 0 || s.dropped > 0 || s.ended {
		s.signal() // for another reader of the same stream
	}
	return e, true, nil
}

// SubscribeEvents opens a stream of the client's events (R-OBS-2) that
// keeps at most capacity of them for its reader (0: DefaultEventCapacity)
// and returns its handle. The stream gets every event from now on; when
// the reader falls capacity events behind, the oldest is dropped, and the
// reader gets an EventDropped with the count before the next event. The
// engine never waits for a reader. The handle stays valid after the
// client's close (the stream then gives its last events, then
// ErrClosed) until FreeEvents.
func SubscribeEvents(client uint64, capacity int64) (uint64, error) {
	cr, err := clientOf(client)
	if err != nil {
		return 0, err
	}
	switch {
	case capacity == 0:
		capacity = DefaultEventCapacity
	case capacity < 0 || capacity > MaxEventCapacity:
		return 0, fmt.Errorf("%w: event capacity %d: want 1 to %d (0: %d)", ErrInvalidArgument, capacity, MaxEventCapacity, DefaultEventCapacity)
	}
	s := &eventStream{hub: cr.hub, capacity: int(capacity), wake: make(chan struct{}, 1)}
	if !cr.hub.add(s) {
		return 0, fmt.Errorf("subscribe to events: %w", simba.ErrClosed)
	}
	return handles.add(s), nil
}

// NextEvent returns the next event of the stream, waiting at most
// timeoutMS for one (0: no wait; NoTimeout: until one comes or the stream
// ends). It fails with a Timeout error when none came in time, with
// ErrClosed once the client is closed and every event was read, and with
// BadHandle when the stream is freed meanwhile.
func NextEvent(stream uint64, timeoutMS int64) (simba.Event, error) {
	s, err := eventsOf(stream)
	if err != nil {
		return simba.Event{}, err
	}
	d, forever, err := waitDuration("timeout", timeoutMS, true)
	if err != nil {
		return simba.Event{}, err
	}
	var expired <-chan time.Time
	if !forever {
		t := time.NewTimer(d)
		defer t.Stop()
		expired = t.C
	}
	for {
		e, ok, err := s.pop()
		if ok || err != nil {
			return e, err
		}
		select {
		case <-s.wake:
		case <-expired:
			if e, ok, err := s.pop(); ok || err != nil {
				return e, err // came in the same instant: the event wins
			}
			return simba.Event{}, fmt.Errorf("next event: none within %dms: %w", timeoutMS, context.DeadlineExceeded)
		}
	}
}

// EventsDropped returns how many events the stream dropped since its
// subscription because its reader was capacity events behind.
func EventsDropped(stream uint64) (uint64, error) {
	s, err := eventsOf(stream)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, nil
}

// FreeEvents ends the subscription and frees its handle; a NextEvent
// waiting on it returns a BadHandle error.
func FreeEvents(stream uint64) error {
	s, err := eventsOf(stream)
	if err != nil {
		return err
	}
	if !handles.remove(stream) {
		return fmt.Errorf("%w: event stream %d is being freed", ErrBadHandle, stream)
	}
	s.hub.remove(s)
	s.mu.Lock()
	s.freed = true
	s.ring, s.n = nil, 0
	s.mu.Unlock()
	s.signal()
	return nil
}
