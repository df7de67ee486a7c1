package features

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	simba "github.com/simba-go/simba/core"
)

// Callbacks.

func (w *world) callbacksPair(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	calls := n.listener(w.name(lease)).snapshot()
	if len(calls)%2 != 0 {
		return fmt.Errorf("%d callbacks: an odd number cannot pair up: %s", len(calls), describe(calls))
	}
	for i := 0; i < len(calls); i += 2 {
		e, r := calls[i], calls[i+1]
		if !e.elected || r.elected || e.term != r.term {
			return fmt.Errorf("callbacks %d and %d are not OnElected and OnRevoked of one term: %s", i+1, i+2, describe(calls))
		}
		if r.start.Before(e.end) {
			return fmt.Errorf("OnRevoked of %v began before its OnElected returned", e.term)
		}
	}
	return nil
}

func (w *world) termsBetween(list string, count int, lease string) error {
	total := 0
	for _, name := range nodeList(list) {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		total += len(n.listener(w.name(lease)).terms())
	}
	if total != count {
		return fmt.Errorf("%s were given %d terms, want %d", list, total, count)
	}
	return nil
}

func (w *world) slowCallbacks(name, lease, phrase string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	l := n.listener(w.name(lease))
	l.mu.Lock()
	l.electedDelay, l.revokedDelay, l.intoClient = d, d, true
	l.mu.Unlock()
	return nil
}

func (w *world) neverOverlapped(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := n.listener(w.name(lease))
	l.mu.Lock()
	most, count := l.maxRunning, len(l.calls)
	l.mu.Unlock()
	if count < 2 {
		return fmt.Errorf("only %d callbacks ran", count)
	}
	if most != 1 {
		return fmt.Errorf("%d callbacks ran at once", most)
	}
	return nil
}

func (w *world) intoClientReturned() error {
	calls := 0
	for _, n := range w.nodes {
		for _, l := range n.listeners {
			l.mu.Lock()
			errs := l.intoErrs
			if l.intoClient {
				calls += len(l.calls)
			}
			l.mu.Unlock()
			if len(errs) > 0 {
				return errors.Join(errs...)
			}
		}
	}
	if calls == 0 {
		return fmt.Errorf("no callback called into the client")
	}
	return nil
}

func (w *world) returnedAfterRevocation(name, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	cb, err := w.revocationOf(n, t)
	if err != nil {
		return err
	}
	if n.marks["returned"].Before(cb.end) {
		return fmt.Errorf("the call returned %v before the listener finished", cb.end.Sub(n.marks["returned"]))
	}
	return nil
}

var (
	stopCall     = regexp.MustCompile(`^stop the election "([^"]*)"$`)
	stepDownCall = regexp.MustCompile(`^step down from "([^"]*)" for (.+)$`)
	releaseCall  = regexp.MustCompile(`^release the lock "([^"]*)"$`)
)

func (w *world) actionOnElected(name, lease, what string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	fn, err := w.blockingCall(n, what)
	if err != nil {
		return err
	}
	n.made = newMadeCall(fn)
	n.listener(w.name(lease)).setCall(n.made)
	return nil
}

// blockingCall returns the blocking call a scenario asks a callback or
// leader work to make, with the ctx it was given.
func (w *world) blockingCall(n *node, what string) (func(ctx context.Context, t *simba.Term) error, error) {
	switch {
	case what == "close the client":
		return func(ctx context.Context, _ *simba.Term) error { return n.client.Close(ctx) }, nil
	case stopCall.MatchString(what):
		el := n.client.Election(w.name(stopCall.FindStringSubmatch(what)[1]))
		return func(ctx context.Context, _ *simba.Term) error { return el.Stop(ctx) }, nil
	case stepDownCall.MatchString(what):
		m := stepDownCall.FindStringSubmatch(what)
		d, err := n.dur(m[2])
		if err != nil {
			return nil, err
		}
		el := n.client.Election(w.name(m[1]))
		return func(ctx context.Context, _ *simba.Term) error { return el.StepDown(ctx, d) }, nil
	case releaseCall.MatchString(what):
		lts := n.locks[w.name(releaseCall.FindStringSubmatch(what)[1])]
		if len(lts) == 0 {
			return nil, fmt.Errorf("node %s holds no lock to %s", n.name, what)
		}
		lt := lts[len(lts)-1]
		return func(ctx context.Context, _ *simba.Term) error { return lt.Release(ctx) }, nil
	}
	return nil, fmt.Errorf("features: unknown blocking call: %q", what)
}

func (w *world) madeCallReturned(phrase, name, took string) error {
	n, within, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	limit, err := n.dur(took)
	if err != nil {
		return err
	}
	mc := n.made
	if mc == nil {
		return fmt.Errorf("features: node %s was asked to make no call", name)
	}
	if err := w.eventually(within, "the call was not made", func() bool { return isClosed(mc.done) }); err != nil {
		return err
	}
	if mc.err != nil {
		return fmt.Errorf("the call failed: %w", mc.err)
	}
	if mc.took > w.grace(limit) {
		return fmt.Errorf("the call took %v, want at most %v", mc.took, limit)
	}
	return nil
}

func (w *world) eventCloseReturned(phrase, name, took string) error {
	n, within, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	limit, err := n.dur(took)
	if err != nil {
		return err
	}
	err = w.eventually(within, "the event listener did not close the client", func() bool {
		n.events.mu.Lock()
		defer n.events.mu.Unlock()
		return n.events.closed
	})
	if err != nil {
		return err
	}
	n.events.mu.Lock()
	defer n.events.mu.Unlock()
	if n.events.closeErr != nil {
		return fmt.Errorf("Close from the event listener: %w", n.events.closeErr)
	}
	if n.events.closeTook > w.grace(limit) {
		return fmt.Errorf("Close from the event listener took %v, want at most %v", n.events.closeTook, limit)
	}
	return nil
}

func (w *world) winsOnBackend(phrase, name, lease string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	l := w.name(lease)
	return w.eventually(d, "no attempt won", func() bool {
		for _, c := range n.attempts(l) {
			if c.won {
				n.marks["win"] = c.end
				n.rejected = c.token
				return true
			}
		}
		return false
	})
}

func (w *world) neverTold(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := n.listener(w.name(lease))
	return w.never(n.cfg().RenewInterval, "the listener was told about the rejected term", func() bool {
		for _, c := range l.snapshot() {
			if c.term.Token() == n.rejected {
				return true
			}
		}
		return false
	})
}

// describe lists callbacks for an error message.
func describe(calls []callback) string {
	var b strings.Builder
	for i, c := range calls {
		if i > 0 {
			b.WriteString(", ")
		}
		if c.elected {
			fmt.Fprintf(&b, "OnElected(%d)", c.term.Token())
		} else {
			fmt.Fprintf(&b, "OnRevoked(%d, %s)", c.term.Token(), c.reason)
		}
	}
	return b.String()
}
