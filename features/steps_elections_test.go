package features

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// sentinels names the errors scenarios expect.
var sentinels = map[string]error{
	"ErrLockTimeout":           simba.ErrLockTimeout,
	"ErrLockHeld":              simba.ErrLockHeld,
	"ErrClientNotStarted":      simba.ErrClientNotStarted,
	"ErrBackendUnavailable":    simba.ErrBackendUnavailable,
	"ErrClosed":                simba.ErrClosed,
	"ErrTermExpired":           simba.ErrTermExpired,
	"ErrAlreadyStarted":        simba.ErrAlreadyStarted,
	"ErrNotStarted":            simba.ErrNotStarted,
	"ErrNameInUse":             simba.ErrNameInUse,
	"ErrInvalidArgument":       simba.ErrInvalidArgument,
	"ErrInvalidName":           simba.ErrInvalidName,
	"ErrInvalidConfig":         simba.ErrInvalidConfig,
	"ErrSessionExpired":        simba.ErrSessionExpired,
	"ErrPermitsMismatch":       simba.ErrPermitsMismatch,
	"context.Canceled":         context.Canceled,
	"context.DeadlineExceeded": context.DeadlineExceeded,
}

// matches checks that err matches the sentinel called name.
func matches(err error, name string) error {
	want, ok := sentinels[name]
	if !ok {
		return fmt.Errorf("features: unknown error %s", name)
	}
	if err == nil {
		return fmt.Errorf("got no error, want %s", name)
	}
	if !errors.Is(err, want) {
		return fmt.Errorf("got %q, want an error matching %s", err.Error(), name)
	}
	return nil
}

// reasonNamed returns the RevokeReason whose String is name.
func reasonNamed(name string) (simba.RevokeReason, error) {
	for r := simba.NotRevoked; r <= simba.TakenOver; r++ {
		if r.String() == name {
			return r, nil
		}
	}
	return 0, fmt.Errorf("features: unknown revoke reason %s", name)
}

var quoted = regexp.MustCompile(`"([^"]*)"`)

// stepCtx bounds a blocking call a step makes.
func (n *node) stepCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 4*n.cfg().LeaseDuration)
}

func (w *world) startElection(name, lease string) (*node, error) {
	n, err := w.node(name)
	if err != nil {
		return nil, err
	}
	l := w.name(lease)
	return n, n.client.Election(l).Start(n.listener(l))
}

// startElections starts the election lease on every node of a list.
func (w *world) startElections(list, lease string) error {
	for _, name := range nodeList(list) {
		if _, err := w.startElection(name, lease); err != nil {
			return err
		}
	}
	return nil
}

// startFails starts an election that must not start, and checks the error.
func (w *world) startFails(name, lease, errName string) error {
	_, err := w.startElection(name, lease)
	return matches(err, errName)
}

// waitLeader waits until the node leads lease, and watches that term.
func (n *node) waitLeader(lease string, within time.Duration) (*simba.Term, error) {
	return n.waitNewLeader(lease, within, nil)
}

// waitNewLeader waits until the node leads lease with a term other than
// old, and watches that term.
func (n *node) waitNewLeader(lease string, within time.Duration, old *simba.Term) (*simba.Term, error) {
	var t *simba.Term
	err := n.w.eventually(within, "node "+n.name+" is not leader of "+lease, func() bool {
		var ok bool
		t, ok = n.leading(lease)
		return ok && t != old
	})
	if err != nil {
		return nil, err
	}
	n.watch(lease, t)
	return t, nil
}

// watch makes t the term later steps mean by "n's term of lease".
func (n *node) watch(lease string, t *simba.Term) {
	if n.watched == nil {
		n.watched = make(map[string]*simba.Term)
	}
	n.watched[lease] = t
}

func (w *world) isLeader(name, lease string) error {
	n, err := w.startElection(name, lease)
	if err != nil {
		return err
	}
	_, err = n.waitLeader(w.name(lease), n.cfg().LeaseDuration)
	return err
}

func (w *world) leadsMany(name string, elections, locks int) error {
	for i := range elections {
		if err := w.isLeader(name, "election-"+strconv.Itoa(i)); err != nil {
			return err
		}
	}
	for i := range locks {
		if err := w.holdsLock(name, "lock-"+strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}

func (w *world) becomesLeader(phrase, name, lease, again, higher, than string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	l := w.name(lease)
	var t *simba.Term
	if again != "" || higher != "" {
		// A new term: not the one a step already saw.
		t, err = n.waitNewLeader(l, d, n.watched[l])
	} else {
		t, err = n.waitLeader(l, d)
	}
	if err != nil {
		return err
	}
	switch {
	case than != "":
		other, err := w.node(than)
		if err != nil {
			return err
		}
		lts := other.locks[l]
		if len(lts) == 0 {
			return fmt.Errorf("node %s never held the lock %s", than, lease)
		}
		if last := lts[len(lts)-1]; t.Token() <= last.Token() {
			return fmt.Errorf("token %d is not above the token %d of %s's lock term", t.Token(), last.Token(), than)
		}
	case higher != "":
		return w.higherThanEarlier(l, t)
	}
	return nil
}

// higherThanEarlier checks that t's token is above every other token of
// lease any node of the scenario was given or won.
func (w *world) higherThanEarlier(lease string, t *simba.Term) error {
	var earlier []uint64
	for _, n := range w.nodes {
		for _, o := range n.terms(lease) {
			if o != t {
				earlier = append(earlier, o.Token())
			}
		}
		for _, c := range n.rec.filter(memory.OpAcquire, lease) {
			if c.won && c.token != t.Token() {
				earlier = append(earlier, c.token)
			}
		}
	}
	if len(earlier) == 0 {
		return fmt.Errorf("no earlier token of %s to compare %d with", lease, t.Token())
	}
	for _, e := range earlier {
		if t.Token() <= e {
			return fmt.Errorf("token %d is not above the earlier token %d of %s", t.Token(), e, lease)
		}
	}
	return nil
}

func (w *world) notLeaderDuring(name, lease, phrase string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	l := w.name(lease)
	return w.never(d, "node "+name+" became leader of "+lease, func() bool {
		return n.client.Election(l).Term() != nil
	})
}

func (w *world) stops(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	ctx, cancel := n.stepCtx()
	defer cancel()
	l := w.name(lease)
	n.marks["stop"] = time.Now()
	if t := n.client.Election(l).Term(); t != nil {
		n.marks["stop.deadline"] = n.marks["stop"].Add(t.Remaining())
	}
	err = n.client.Election(l).Stop(ctx)
	n.marks["returned"] = time.Now()
	return err
}

// backgroundStop is a Stop running while later steps look at what happens.
type backgroundStop struct {
	done     chan struct{}
	err      error
	returned time.Time
}

func (w *world) beginsToStop(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	bs := &backgroundStop{done: make(chan struct{})}
	n.stop = bs
	n.marks["stop"] = time.Now()
	el := n.client.Election(w.name(lease))
	n.goBackground(func() {
		defer close(bs.done)
		ctx, cancel := n.stepCtx()
		defer cancel()
		bs.err = el.Stop(ctx)
		bs.returned = time.Now()
	})
	return nil
}

func (w *world) stepsDown(name, lease, phrase string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	ctx, cancel := n.stepCtx()
	defer cancel()
	n.marks["stepdown"] = time.Now()
	err = n.client.Election(w.name(lease)).StepDown(ctx, d)
	n.marks["returned"] = time.Now()
	return err
}

// leaderStepsDown makes whichever node leads lease step down, times times.
func (w *world) leaderStepsDown(lease, phrase string, times int) error {
	cooldown, err := w.dur(phrase, w.timing)
	if err != nil {
		return err
	}
	l := w.name(lease)
	for i := range times {
		var leader *node
		err := w.eventually(w.lease(w.timing), fmt.Sprintf("no node leads %s (step-down %d)", lease, i+1), func() bool {
			for _, n := range w.sortedNodes() {
				if _, ok := n.leading(l); ok {
					leader = n
					return true
				}
			}
			return false
		})
		if err != nil {
			return err
		}
		ctx, cancel := leader.stepCtx()
		err = leader.client.Election(l).StepDown(ctx, cooldown)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *world) hasLeader(lease, phrase string) error {
	d, err := w.dur(phrase, w.timing)
	if err != nil {
		return err
	}
	l := w.name(lease)
	return w.eventually(d, "no node leads "+lease, func() bool {
		for _, n := range w.nodes {
			if _, ok := n.leading(l); ok {
				return true
			}
		}
		return false
	})
}

func (w *world) restartInFlight(name, lease string, times int) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	el := n.client.Election(l)
	for i := range times {
		err := w.eventually(n.cfg().LeaseDuration, fmt.Sprintf("no attempt in flight (restart %d)", i+1), func() bool {
			return n.rec.inFlight(l) > 0
		})
		if err != nil {
			return err
		}
		ctx, cancel := n.stepCtx()
		err = el.Stop(ctx)
		cancel()
		if err != nil {
			return err
		}
		if err := el.Start(n.listener(l)); err != nil {
			return err
		}
	}
	return nil
}

// stopsInFlight stops the election once an acquire of it is in flight.
func (w *world) stopsInFlight(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	if err := w.eventually(n.cfg().LeaseDuration, "an acquire in flight", func() bool { return n.rec.inFlight(l) > 0 }); err != nil {
		return err
	}
	return w.stops(name, lease)
}

// stopReturnedAfterAttempt checks that the stop waited for the acquire in
// flight when it began, and for the release of what that acquire won.
func (w *world) stopReturnedAfterAttempt(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	stop, returned := n.marks["stop"], n.marks["returned"]
	var won *call
	for _, c := range n.rec.filter(memory.OpAcquire, l) {
		if c.start.After(stop) {
			return fmt.Errorf("an acquire of %s was sent %v after the stop began", l, c.start.Sub(stop))
		}
		if c.end.IsZero() || c.end.After(returned) {
			return fmt.Errorf("the stop returned before the acquire in flight was answered")
		}
		if c.won {
			won = &c
		}
	}
	if won == nil {
		return fmt.Errorf("the acquire in flight at the stop did not win %s: nothing to check", l)
	}
	for _, c := range n.rec.filter(memory.OpRelease, l) {
		if c.token == won.token && c.err == nil && !c.end.IsZero() && !c.end.After(returned) {
			return nil
		}
	}
	return fmt.Errorf("the stop returned before token %d, won by the acquire in flight, was released", won.token)
}

func (w *world) stopAgainFails(lease, name, errName string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	ctx, cancel := n.stepCtx()
	defer cancel()
	return matches(n.client.Election(w.name(lease)).Stop(ctx), errName)
}
