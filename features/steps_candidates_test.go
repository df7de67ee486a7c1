package features

import (
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// Candidates.

// attempts returns the node's acquire calls of lease that were answered.
func (n *node) attempts(lease string) []call {
	var out []call
	for _, c := range n.rec.filter(memory.OpAcquire, lease) {
		if !c.end.IsZero() {
			out = append(out, c)
		}
	}
	return out
}

func (w *world) madeAttempts(name string, count int, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	cfg := n.cfg()
	within := time.Duration(count)*(cfg.RenewInterval/2+cfg.RetryJitter) + cfg.LeaseDuration
	l := w.name(lease)
	return w.eventually(within, fmt.Sprintf("node %s did not make %d attempts", name, count), func() bool {
		return len(n.attempts(l)) >= count
	})
}

// gaps returns, for the node's answered attempts at lease, how long it
// waited after each answer before the next attempt.
func (w *world) gaps(n *node, lease string) []time.Duration {
	cs := n.attempts(w.name(lease))
	var out []time.Duration
	for i := 1; i < len(cs); i++ {
		out = append(out, cs[i].start.Sub(cs[i-1].end))
	}
	return out
}

func (w *world) attemptSpacing(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	cfg := n.cfg()
	lo, hi := cfg.RenewInterval/2, cfg.RenewInterval/2+cfg.RetryJitter
	if !w.env.fake {
		hi += 100 * time.Millisecond
	}
	gs := w.gaps(n, lease)
	if len(gs) == 0 {
		return fmt.Errorf("node %s made fewer than two attempts", name)
	}
	for i, g := range gs {
		if g < lo || g >= hi {
			return fmt.Errorf("wait %d was %v, want within [%v, %v)", i+1, g, lo, hi)
		}
	}
	for _, g := range gs[1:] {
		if g != gs[0] {
			return nil
		}
	}
	return fmt.Errorf("every wait was %v: no random delay", gs[0])
}

func (w *world) attemptRefused(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	return w.eventually(n.cfg().LeaseDuration, "no attempt was refused", func() bool {
		for _, c := range n.attempts(l) {
			if !c.won && c.err == nil {
				return true
			}
		}
		return false
	})
}

func (w *world) watching(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	return w.eventually(n.cfg().RenewInterval, "no release watch is in place", func() bool {
		for _, c := range n.rec.filter(memory.OpWatchRelease, l) {
			if !c.end.IsZero() && c.err == nil {
				return true
			}
		}
		return false
	})
}

// firstAfterStop returns node name's first attempt at lease after node
// stopper stopped its election, the attempt before it, which was refused,
// and the instant of the stop.
func (w *world) firstAfterStop(name, lease, stopper string) (n *node, first, prev call, stop time.Time, err error) {
	if n, err = w.node(name); err != nil {
		return
	}
	s, err := w.node(stopper)
	if err != nil {
		return
	}
	if stop = s.marks["stop"]; stop.IsZero() {
		return n, first, prev, stop, fmt.Errorf("features: node %s stopped no election", stopper)
	}
	// The refused attempt is the last one refused by the stop: on the fake
	// clock it may begin at the very instant of the stop.
	cs := n.attempts(w.name(lease))
	j := -1
	for k, c := range cs {
		if !c.start.After(stop) && !c.won && c.err == nil {
			j = k
		}
	}
	i := j + 1
	switch {
	case j < 0:
		return n, first, prev, stop, fmt.Errorf("node %s had no attempt refused before the stop", name)
	case i >= len(cs):
		return n, first, prev, stop, fmt.Errorf("node %s made no attempt after the stop", name)
	case cs[i].start.Before(stop):
		return n, first, prev, stop, fmt.Errorf("node %s attempted again before the stop", name)
	case !cs[i].won:
		return n, cs[i], cs[i-1], stop, fmt.Errorf("node %s's first attempt after the stop did not win", name)
	}
	return n, cs[i], cs[i-1], stop, nil
}

func (w *world) wonAtOnce(name, lease, stopper string) error {
	n, first, _, stop, err := w.firstAfterStop(name, lease, stopper)
	if err != nil {
		return err
	}
	if after := first.start.Sub(stop); after >= n.cfg().RenewInterval/2 {
		return fmt.Errorf("node %s attempted %v after the stop: not before its regular attempt", name, after)
	}
	return nil
}

func (w *world) wonAtNextAttempt(name, lease, stopper string) error {
	n, first, prev, _, err := w.firstAfterStop(name, lease, stopper)
	if err != nil {
		return err
	}
	if gap := first.start.Sub(prev.end); gap < n.cfg().RenewInterval/2 {
		return fmt.Errorf("the winning attempt came %v after the one before: not a regular attempt", gap)
	}
	return nil
}

func (w *world) oneInFlight(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	switch m := n.rec.maxInFlight(w.name(lease)); m {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("node %s never made an attempt", name)
	default:
		return fmt.Errorf("node %s had %d attempts in flight at once", name, m)
	}
}

func (w *world) attemptAnswered(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	return w.eventually(n.cfg().LeaseDuration, "no attempt was answered by the backend", func() bool {
		for _, c := range n.rec.filter(memory.OpAcquire, l) {
			if !c.answered.IsZero() && c.won {
				return true
			}
		}
		return false
	})
}

func (w *world) listenerNeverCalled(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if calls := n.listener(w.name(lease)).snapshot(); len(calls) != 0 {
		return fmt.Errorf("the listener was called %d times", len(calls))
	}
	return nil
}

// heldWin returns the winning acquire of node n whose reply was held back.
func (n *node) heldWin() (call, error) {
	c, err := n.heldCall("acquire")
	if err != nil {
		return call{}, err
	}
	if !c.won {
		if c.err != nil {
			return call{}, fmt.Errorf("the held acquire failed: %w", c.err)
		}
		return call{}, fmt.Errorf("the held acquire did not win")
	}
	return *c, nil
}

func (w *world) releasedHeldWin(phrase, name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	win, err := n.heldWin()
	if err != nil {
		return err
	}
	within := n.cfg().RenewInterval
	if phrase != "" {
		if within, err = n.dur(phrase); err != nil {
			return err
		}
	}
	return w.eventually(within, fmt.Sprintf("token %d was not released", win.token), func() bool {
		for _, c := range n.rec.filter(memory.OpRelease, win.name) {
			if c.token == win.token && c.session == win.session && !c.answered.IsZero() {
				return true
			}
		}
		return false
	})
}

func (w *world) neverElectedWithHeld(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	win, err := n.heldWin()
	if err != nil {
		return err
	}
	for _, t := range n.terms(win.name) {
		if t.Token() == win.token && t.Session() == win.session {
			return fmt.Errorf("node %s adopted %v from the late reply", name, t)
		}
	}
	for _, e := range n.events.of(simba.EventElected) {
		if e.Name == win.name && e.Token == win.token && e.Session == win.session {
			return fmt.Errorf("node %s published Elected for the late reply's token %d", name, win.token)
		}
	}
	return nil
}
