package simbazk

import (
	"errors"
	"sync"
	"time"
)

// inflight counts the requests in flight on one library connection, so
// that the connection is closed only once none is, and refuses new ones
// once it closes.
//
// The library answers a request with ErrConnectionClosed as soon as Close
// was called, while its receiver may still be decoding the server's answer
// into the response. Most methods then leave the response alone, but
// CreateContainer reads it whatever the error: a data race with the
// receiver. Of the methods the backend uses (Create, CreateContainer,
// Delete, Exists, ExistsW, Get, Children, Multi, AddAuth) only
// CreateContainer does so, and only the watch connection sends it. A
// request queued while Close runs can also be answered three times, one
// more than its channel holds, which blocks the library's goroutines (and
// so Close) for good. Every request of the watch connection and of each
// session's connection therefore runs through [inflight.do].
type inflight struct {
	mu      sync.Mutex
	n       int
	closing bool
	idle    chan struct{} // made by quiesce, closed once closing and n is 0
}

// errConnClosing is what a request answers when its connection is closing.
var errConnClosing = errors.New("simbazk: connection closing")

// do runs f, a request on the connection, and returns its error, unless
// the connection is closing: then it answers errConnClosing.
func (g *inflight) do(f func() error) error {
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return errConnClosing
	}
	g.n++
	g.mu.Unlock()
	defer g.leave()
	return f()
}

func (g *inflight) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.closing {
		close(g.idle)
	}
}

// quiesce waits until no guarded call is in flight on a connection about
// to close, so that none can read a response its receiver still writes.
// A call normally ends with the server's answer, within grace; past it the
// server is taken as unresponsive (the close request it is about to be
// sent would not be confirmed either) and the network connection is
// closed by dropLink: the receiver stops at once, and the library fails
// every request it sent and, once the reconnect fails, every one it had
// not sent yet, which ends the calls. bound caps the whole wait anyway;
// it is reached only when the library does neither. It refuses new calls
// first; call it once.
func (g *inflight) quiesce(grace, bound time.Duration, dropLink func()) {
	g.mu.Lock()
	g.closing = true // new calls are refused
	g.idle = make(chan struct{})
	if g.n == 0 {
		close(g.idle)
	}
	idle := g.idle
	g.mu.Unlock()
	if !waitFor(idle, grace) {
		dropLink()
		waitFor(idle, bound-grace)
	}
}
