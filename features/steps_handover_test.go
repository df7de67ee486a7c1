package features

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// Handover.

func (w *world) slowRevocation(name, lease, phrase string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	l := n.listener(w.name(lease))
	l.mu.Lock()
	l.revokedDelay = d
	l.mu.Unlock()
	return nil
}

// revocationOf returns the OnRevoked call of t, once it has finished.
func (w *world) revocationOf(n *node, t *simba.Term) (callback, error) {
	l := n.listener(t.Name())
	var cb callback
	err := w.eventually(2*n.cfg().LeaseDuration, "the listener was not told of the revocation", func() bool {
		revs := l.revocations(t)
		if len(revs) == 0 || revs[0].end.IsZero() {
			return false
		}
		cb = revs[0]
		return true
	})
	return cb, err
}

func (w *world) handoverOrder(name, lease, reasonName string) error {
	want, err := reasonNamed(reasonName)
	if err != nil {
		return err
	}
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	revoked, err := n.revokedAt(t)
	if err != nil {
		return err
	}
	var rel *call
	for _, c := range n.rec.filter(memory.OpRelease, t.Name()) {
		if c.token == t.Token() {
			rel = &c
			break
		}
	}
	if rel == nil {
		return fmt.Errorf("node %s never released %v", name, t)
	}
	cb, err := w.revocationOf(n, t)
	if err != nil {
		return err
	}
	if cb.reason != want {
		return fmt.Errorf("the listener was told %s, want %s", cb.reason, want)
	}
	returned := n.marks["returned"]
	steps := []struct {
		what string
		at   time.Time
	}{
		{"term revoked", revoked},
		{"release sent", rel.start},
		{"release answered", rel.end},
		{"listener called", cb.start},
		{"listener returned", cb.end},
		{"call returned", returned},
	}
	for i := 1; i < len(steps); i++ {
		if steps[i].at.Before(steps[i-1].at) {
			return fmt.Errorf("%q came %v before %q", steps[i].what, steps[i-1].at.Sub(steps[i].at), steps[i-1].what)
		}
	}
	return nil
}

func (w *world) takenDuringRevocation(name, other, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	l := n.listener(t.Name())
	err = w.eventually(n.cfg().RenewInterval, "the listener was not told of the revocation", func() bool {
		return len(l.revocations(t)) > 0
	})
	if err != nil {
		return err
	}
	if err := w.attempt(other, w.name(lease), "succeeds"); err != nil {
		return err
	}
	if revs := l.revocations(t); !revs[0].end.IsZero() {
		return fmt.Errorf("the listener had already finished when %s got the lock", other)
	}
	return nil
}

func (w *world) stopReturnsAfterListener(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	bs := n.stop
	if bs == nil {
		return fmt.Errorf("features: node %s did not begin to stop", name)
	}
	err = w.eventually(3*n.cfg().LeaseDuration, "the stop did not return", func() bool { return isClosed(bs.done) })
	if err != nil {
		return err
	}
	if bs.err != nil {
		return bs.err
	}
	for _, l := range n.listeners {
		for _, c := range l.snapshot() {
			if !c.elected && (c.end.IsZero() || bs.returned.Before(c.end)) {
				return fmt.Errorf("the stop returned before the listener finished")
			}
		}
	}
	return nil
}

// leaseState returns the snapshot state of lease on n, "" when absent.
func (n *node) leaseState(lease string) simba.LeaseState {
	for _, ls := range n.client.Snapshot().Leases {
		if ls.Name == lease {
			return ls.State
		}
	}
	return ""
}

func (w *world) snapshotState(phrase, name, lease, state string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	want := simba.LeaseState(state)
	if phrase == "" {
		if got := n.leaseState(l); got != want {
			return fmt.Errorf("the snapshot shows %s as %q, want %s", lease, got, want)
		}
		return nil
	}
	d, err := n.dur(phrase)
	if err != nil {
		return err
	}
	return w.eventually(d, "the snapshot does not show "+lease+" as "+state, func() bool { return n.leaseState(l) == want })
}

// attemptsBetween returns the node's acquire calls of lease started in
// (from, to): an attempt made at the very instant from (the winning one, on
// the fake clock) is not after it.
func (n *node) attemptsBetween(lease string, from, to time.Time) []call {
	var out []call
	for _, c := range n.rec.filter(memory.OpAcquire, lease) {
		if c.start.After(from) && c.start.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

func (w *world) noAttemptUntil(name, lease, phrase, after string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	from := n.marks["stepdown"]
	if after == "its win on the backend" {
		from = n.marks["win"]
	}
	if from.IsZero() {
		return fmt.Errorf("features: no %s was noted", after)
	}
	time.Sleep(time.Until(from.Add(d)))
	if cs := n.attemptsBetween(w.name(lease), from, from.Add(d)); len(cs) > 0 {
		return fmt.Errorf("node %s attempted %v after %s", name, cs[0].start.Sub(from), after)
	}
	return nil
}

func (w *world) wonNoSooner(name, lease, phrase string) error {
	n, t, d, err := w.termDur(name, lease, phrase)
	if err != nil {
		return err
	}
	at, err := n.wonAt(t)
	if err != nil {
		return err
	}
	if got := at.Sub(n.marks["stepdown"]); got < d {
		return fmt.Errorf("%v was won %v after the step-down, want no sooner than %v", t, got, d)
	}
	return nil
}

func (w *world) noAttemptDuring(name, lease, phrase string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	from := time.Now()
	time.Sleep(d)
	if cs := n.attemptsBetween(w.name(lease), from, time.Now()); len(cs) > 0 {
		return fmt.Errorf("node %s made %d attempts at %s", name, len(cs), lease)
	}
	return nil
}

func (w *world) snapshotIdle(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	switch s := n.leaseState(w.name(lease)); s {
	case simba.StateHolding, simba.StateContending, simba.StateCooldown:
		return fmt.Errorf("the snapshot shows %s as %s", lease, s)
	}
	return nil
}

// Failover.

func (w *world) failover(name, lease, stalled string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	s, err := w.node(stalled)
	if err != nil {
		return err
	}
	cfg := n.cfg()
	bound := cfg.LeaseDuration + cfg.RenewInterval/2 + cfg.RetryJitter
	stall := s.marks["stall"]
	if stall.IsZero() {
		return fmt.Errorf("features: the connection of node %s did not stall", stalled)
	}
	l := w.name(lease)
	err = w.eventually(bound-time.Since(stall), "no take-over", func() bool {
		_, ok := n.leading(l)
		return ok
	})
	if err != nil {
		return fmt.Errorf("%w (bound %v after the stall, plus grace)", err, bound)
	}
	t, _ := n.leading(l)
	n.watch(l, t)
	at, err := n.wonAt(t)
	if err != nil {
		return err
	}
	recordFailover(w.env.name, at.Sub(stall), bound)
	return nil
}

func (w *world) endedBefore(name, lease, reasonName, other string) error {
	want, err := reasonNamed(reasonName)
	if err != nil {
		return err
	}
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	if t.Reason() != want {
		return fmt.Errorf("%v ended with %s, want %s", t, t.Reason(), want)
	}
	revoked, err := n.revokedAt(t)
	if err != nil {
		return err
	}
	o, ot, err := w.term(other, lease)
	if err != nil {
		return err
	}
	var answered time.Time
	for _, c := range o.rec.filter(memory.OpAcquire, ot.Name()) {
		if c.won && c.token == ot.Token() {
			answered = c.answered
		}
	}
	if answered.IsZero() {
		return fmt.Errorf("no acquire of node %s won %v", other, ot)
	}
	if answered.Before(revoked) {
		return fmt.Errorf("%s won the lease %v before %s's term ended", other, revoked.Sub(answered), name)
	}
	return nil
}

// startWork runs wk as node name's leader work for lease, until the
// scenario ends.
func (w *world) startWork(name, lease string, wk *work) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	if _, ok := n.works[l]; ok {
		return fmt.Errorf("node %s already runs work for %s", name, lease)
	}
	wk.done = make(chan struct{})
	n.works[l] = wk
	el := n.client.Election(l)
	started := make(chan error, 1)
	n.goBackground(func() {
		defer close(wk.done)
		// RunWhileLeader returns once the scenario ends, or when the work
		// closes the client; an error before any run means it did not start.
		err := el.RunWhileLeader(w.ctx, wk.fn)
		wk.mu.Lock()
		wk.result = err
		wk.mu.Unlock()
		started <- err
	})
	// Give a failed start the chance to show.
	w.settle()
	select {
	case err := <-started:
		wk.mu.Lock()
		ran := len(wk.runs) > 0
		wk.mu.Unlock()
		if err != nil && !ran {
			return fmt.Errorf("RunWhileLeader: %w", err)
		}
	default:
	}
	return nil
}

// Leader work, as "runs leader work for "x" that ..." describes it.
var (
	workExits   = regexp.MustCompile(`^takes (.+) to exit once interrupted$`)
	workIgnores = regexp.MustCompile(`^ignores interruption for (.+)$`)
	workEnds    = regexp.MustCompile(`^(fails|panics|finishes) after (.+)$`)
	workCalls   = regexp.MustCompile(`^once running, will (.+)$`)
)

// workThat builds the leader work of node n a phrase describes: it "takes
// 1s to exit once interrupted", "ignores interruption for 10s", "fails
// after 1s" (or panics, or finishes), or "once running, will" make a call.
func (w *world) workThat(n *node, what string) (*work, error) {
	wk, err := w.parseWork(n, what)
	if wk != nil {
		wk.quit = w.ctx.Done()
	}
	return wk, err
}

func (w *world) parseWork(n *node, what string) (*work, error) {
	var m []string
	match := func(re *regexp.Regexp) bool {
		m = re.FindStringSubmatch(what)
		return m != nil
	}
	switch {
	case match(workExits):
		d, err := n.dur(m[1])
		return &work{exitAfter: d}, err
	case match(workIgnores):
		d, err := n.dur(m[1])
		return &work{ignoreFor: d}, err
	case match(workEnds):
		d, err := n.dur(m[2])
		return &work{endAfter: d, ending: m[1]}, err
	case match(workCalls):
		fn, err := w.blockingCall(n, m[1])
		if err != nil {
			return nil, err
		}
		n.made = newMadeCall(fn)
		return &work{call: n.made}, nil
	}
	return nil, fmt.Errorf("features: leader work that %s: unknown kind of work", what)
}

func (w *world) runsWork(name, lease, what string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	wk, err := w.workThat(n, what)
	if err != nil {
		return err
	}
	return w.startWork(name, lease, wk)
}

func (w *world) workCallReturns(phrase, name, lease, want string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	wk, ok := n.works[w.name(lease)]
	if !ok {
		return fmt.Errorf("node %s runs no work for %s", name, lease)
	}
	select {
	case <-wk.done:
	case <-time.After(d):
		return fmt.Errorf("the leader work call for %s still runs after %v", lease, d)
	}
	wk.mu.Lock()
	got := wk.result
	wk.mu.Unlock()
	var we *simba.WorkError
	switch {
	case want == "nil" && got != nil:
		return fmt.Errorf("the call returned %w, want nil", got)
	case want != "nil" && !errors.As(got, &we):
		return fmt.Errorf("the call returned %w, want a *simba.WorkError", got)
	case want != "nil" && !errors.Is(got, errWorkFailed) && we.Panic == nil:
		return fmt.Errorf("the call returned %w, not the work's failure", got)
	}
	return nil
}

// workOf returns the node's work for lease and its run for the term steps
// mean.
func (w *world) workOf(name, lease string) (*node, *simba.Term, workRun, error) {
	n, t, err := w.term(name, lease)
	if err != nil {
		return nil, nil, workRun{}, err
	}
	wk, ok := n.works[t.Name()]
	if !ok {
		return nil, nil, workRun{}, fmt.Errorf("node %s runs no work for %s", name, lease)
	}
	r, ok := wk.run(t)
	if !ok {
		return nil, nil, workRun{}, fmt.Errorf("the work never ran for %v", t)
	}
	return n, t, r, nil
}

// releaseOfTerm returns the node's release call of t.
func (n *node) releaseOfTerm(t *simba.Term) (call, bool) {
	for _, c := range n.rec.filter(memory.OpRelease, t.Name()) {
		if c.token == t.Token() && c.session == t.Session() {
			return c, true
		}
	}
	return call{}, false
}

func (w *world) workHandoverOrder(name, lease string) error {
	n, t, r, err := w.workOf(name, lease)
	if err != nil {
		return err
	}
	revoked, err := n.revokedAt(t)
	if err != nil {
		return err
	}
	rel, ok := n.releaseOfTerm(t)
	if !ok {
		return fmt.Errorf("node %s never released %v", name, t)
	}
	// Revoking the term is what interrupts the work (its ctx is the
	// term's), and the event is stamped just after: one instant.
	if r.interrupted.IsZero() {
		return fmt.Errorf("the work was never interrupted")
	}
	if err := w.near("the interruption, after the revocation,", r.interrupted.Sub(revoked), 0); err != nil {
		return err
	}
	first := revoked
	if r.interrupted.Before(first) {
		first = r.interrupted
	}
	return inOrder([]instant{
		{"term revoked, work interrupted", first},
		{"work exited", r.end},
		{"release sent", rel.start},
		{"release answered", rel.end},
		{"call returned", n.marks["returned"]},
	})
}

// instant is a named point in time of a sequence.
type instant struct {
	what string
	at   time.Time
}

// inOrder checks that the instants are set and come in order (equal is in
// order: the fake clock does not move while nothing waits).
func inOrder(seq []instant) error {
	for i, s := range seq {
		if s.at.IsZero() {
			return fmt.Errorf("%q never happened", s.what)
		}
		if i > 0 && s.at.Before(seq[i-1].at) {
			return fmt.Errorf("%q came %v before %q", s.what, seq[i-1].at.Sub(s.at), seq[i-1].what)
		}
	}
	return nil
}

func (w *world) releasedAtDeadline(name, lease string) error {
	n, t, r, err := w.workOf(name, lease)
	if err != nil {
		return err
	}
	rel, ok := n.releaseOfTerm(t)
	if !ok {
		return fmt.Errorf("node %s never released %v", name, t)
	}
	deadline := n.marks["stop.deadline"]
	if deadline.IsZero() {
		return fmt.Errorf("features: the term's deadline at the stop was not noted")
	}
	if err := w.near("the release, after the deadline at the stop,", rel.start.Sub(deadline), 0); err != nil {
		return err
	}
	if !r.end.IsZero() && !r.end.After(rel.start) {
		return fmt.Errorf("the work exited %v before the release: the release waited for it", rel.start.Sub(r.end))
	}
	return nil
}

func (w *world) workInterruptedAtEnd(name, lease string) error {
	n, t, r, err := w.workOf(name, lease)
	if err != nil {
		return err
	}
	revoked, err := n.revokedAt(t)
	if err != nil {
		return err
	}
	// The interruption is noted by a context.AfterFunc of the work's ctx,
	// which runs on a goroutine of its own just after the revocation.
	err = w.eventually(w.tolerance(), "the work was not interrupted", func() bool {
		_, _, r, err = w.workOf(name, lease)
		return err == nil && !r.interrupted.IsZero() && r.ctx.Err() != nil
	})
	if err != nil {
		return err
	}
	if cause := context.Cause(r.ctx); !errors.Is(cause, simba.ErrTermExpired) {
		return fmt.Errorf("the work's context ended with %w, want a cause matching ErrTermExpired", cause)
	}
	if err := w.near("the interruption, after the revocation,", r.interrupted.Sub(revoked), 0); err != nil {
		return err
	}
	if !r.end.IsZero() {
		return fmt.Errorf("the work has already exited: it was waited for")
	}
	return nil
}

func (w *world) noRelease(name, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	if rel, ok := n.releaseOfTerm(t); ok {
		return fmt.Errorf("node %s released %v %v after it ended", name, t, rel.start.Sub(n.marks["stall"]))
	}
	return nil
}
