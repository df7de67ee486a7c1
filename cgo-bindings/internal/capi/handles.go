package capi

import (
	"fmt"
	"sync"
)

// kind is what a handle stands for.
type kind int

const (
	kindClient kind = iota + 1
	kindTerm
	kindElection
	kindCancel
	kindEvents
)

var kindNames = map[kind]string{kindClient: "client", kindTerm: "term", kindElection: "election", kindCancel: "cancel", kindEvents: "stream"}

func (k kind) String() string { return kindNames[k] }

// table maps handles to their values. Handles are never reused within a
// process: a stale handle can only be unknown, never another object.
type table struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]any
}

var handles = table{m: make(map[uint64]any)}

func kindOf(v any) kind {
	switch v.(type) {
	case *clientRef:
		return kindClient
	case *termRef:
		return kindTerm
	case *electionRef:
		return kindElection
	case *cancelRef:
		return kindCancel
	case *eventStream:
		return kindEvents
	}
	return 0
}

// add stores v and returns its new handle, never 0.
func (t *table) add(v any) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	t.m[t.next] = v
	return t.next
}

// get returns the value of h when it is of kind k.
func (t *table) get(h uint64, k kind) (any, error) {
	t.mu.Lock()
	v, ok := t.m[h]
	t.mu.Unlock()
	switch {
	case h == 0:
		return nil, fmt.Errorf("%w: %s handle 0", ErrBadHandle, k)
	case !ok:
		return nil, fmt.Errorf("%w: no %s with handle %d (never made, or freed)", ErrBadHandle, k, h)
	case kindOf(v) != k:
		return nil, fmt.Errorf("%w: handle %d is a %s, not a %s", ErrBadHandle, h, kindOf(v), k)
	}
	return v, nil
}

// take forgets h and returns its value, if it was there.
func (t *table) take(h uint64) (any, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[h]
	delete(t.m, h)
	return v, ok
}

// remove forgets h and reports whether it was there.
func (t *table) remove(h uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[h]
	delete(t.m, h)
	return ok
}

// Counts is the number of live handles of each kind.
type Counts struct {
	Clients, Terms, Elections, Cancels, Events int
}

// Total is the number of live handles.
func (c Counts) Total() int { return c.Clients + c.Terms + c.Elections + c.Cancels + c.Events }

// HandleCounts returns the number of live handles of each kind; tests of
// the bindings use it to prove that nothing leaks.
func HandleCounts() Counts {
	handles.mu.Lock()
	defer handles.mu.Unlock()
	var c Counts
	for _, v := range handles.m {
		switch kindOf(v) {
		case kindClient:
			c.Clients++
		case kindTerm:
			c.Terms++
		case kindElection:
			c.Elections++
		case kindCancel:
			c.Cancels++
		case kindEvents:
			c.Events++
		}
	}
	return c
}

// handleOf returns the value of the handle h, which must be of kind k,
// whose values are Ts.
func handleOf[T any](h uint64, k kind) (T, error) {
	v, err := handles.get(h, k)
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

func clientOf(h uint64) (*clientRef, error)     { return handleOf[*clientRef](h, kindClient) }
func termOf(h uint64) (*termRef, error)         { return handleOf[*termRef](h, kindTerm) }
func electionOf(h uint64) (*electionRef, error) { return handleOf[*electionRef](h, kindElection) }
func cancelOf(h uint64) (*cancelRef, error)     { return handleOf[*cancelRef](h, kindCancel) }
func eventsOf(h uint64) (*eventStream, error)   { return handleOf[*eventStream](h, kindEvents) }
