package features

import (
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// term returns the term later steps mean by "n's term of lease": the one
// the last step that saw n win lease watched, or else n's latest.
func (w *world) term(name, lease string) (*node, *simba.Term, error) {
	n, err := w.node(name)
	if err != nil {
		return nil, nil, err
	}
	l := w.name(lease)
	if t := n.watched[l]; t != nil {
		return n, t, nil
	}
	t, err := n.term(l)
	return n, t, err
}

func (w *world) termsEnded(name, list, reasonName string) error {
	want, err := reasonNamed(reasonName)
	if err != nil {
		return err
	}
	names := quoted.FindAllStringSubmatch(list, -1)
	if len(names) == 0 {
		return fmt.Errorf("features: no quoted lease names in %q", list)
	}
	for _, m := range names {
		_, t, err := w.term(name, m[1])
		if err != nil {
			return err
		}
		if got := t.Reason(); got != want {
			return fmt.Errorf("%s: %s's term ended with %s, want %s", m[1], name, got, want)
		}
	}
	return nil
}

func (w *world) termEnds(phrase, name, lease, reasonName string) error {
	want, err := reasonNamed(reasonName)
	if err != nil {
		return err
	}
	_, t, d, err := w.termDur(name, lease, phrase)
	if err != nil {
		return err
	}
	err = w.eventually(d, "the term did not end", func() bool {
		return isClosed(t.Done()) && t.Reason() != simba.NotRevoked
	})
	if err != nil {
		return err
	}
	if got := t.Reason(); got != want {
		return fmt.Errorf("%v ended with %s, want %s", t, got, want)
	}
	return nil
}

// revokedAt returns when the node published the Revoked event of t,
// waiting a little for the event to be delivered.
func (n *node) revokedAt(t *simba.Term) (time.Time, error) {
	var at time.Time
	err := n.w.eventually(n.cfg().RenewInterval, "node "+n.name+" published no Revoked event for "+t.String(), func() bool {
		for _, e := range n.events.of(simba.EventRevoked) {
			if e.Name == t.Name() && e.Token == t.Token() {
				at = e.Time
				return true
			}
		}
		return false
	})
	return at, err
}

func (w *world) termEndedAfterSuccess(name, lease, reasonName, phrase string) error {
	want, err := reasonNamed(reasonName)
	if err != nil {
		return err
	}
	n, t, d, err := w.termDur(name, lease, phrase)
	if err != nil {
		return err
	}
	if t.Reason() != want {
		return fmt.Errorf("%v ended with %s, want %s", t, t.Reason(), want)
	}
	at, err := n.revokedAt(t)
	if err != nil {
		return err
	}
	last, err := n.lastSuccessfulKeepAlive()
	if err != nil {
		return err
	}
	return w.near("the revocation", at.Sub(last.start), d)
}

// near checks that got is want, within the world's tolerance.
func (w *world) near(what string, got, want time.Duration) error {
	if diff := got - want; diff > w.tolerance() || -diff > w.tolerance() {
		return fmt.Errorf("%s came %v after, want %v", what, got, want)
	}
	return nil
}

func (w *world) termValidAtMost(name, lease, phrase string) error {
	_, t, d, err := w.termDur(name, lease, phrase)
	if err != nil {
		return err
	}
	if !t.Valid() {
		return fmt.Errorf("%v is not valid", t)
	}
	if r := t.Remaining(); r <= 0 || r > d {
		return fmt.Errorf("%v has %v remaining, want some and at most %v", t, r, d)
	}
	return nil
}

func (w *world) termAsSession(name, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	// Read the term between two readings of the session: it must lie
	// between them.
	before := n.client.Snapshot().Session.Remaining
	r := t.Remaining()
	after := n.client.Snapshot().Session.Remaining
	if r > before || r < after {
		return fmt.Errorf("%v has %v remaining; the session had %v before and %v after", t, r, before, after)
	}
	return nil
}

func (w *world) termInvalid(name, lease string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	return invalid(t)
}

func invalid(t *simba.Term) error {
	if t.Valid() || t.Remaining() != 0 {
		return fmt.Errorf("%v: valid %v, %v remaining; want invalid with none", t, t.Valid(), t.Remaining())
	}
	return nil
}

func (w *world) termStillValid(name, lease string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	if !t.Valid() || t.Reason() != simba.NotRevoked {
		return fmt.Errorf("%v is not valid (reason %s)", t, t.Reason())
	}
	return nil
}

// termLost lets the time of phrase pass, and checks that the term lost
// exactly that much of its remaining time meanwhile.
func (w *world) termLost(name, lease, phrase string) error {
	_, t, d, err := w.termDur(name, lease, phrase)
	if err != nil {
		return err
	}
	before := t.Remaining()
	time.Sleep(d)
	w.settle()
	if got := before - t.Remaining(); got != d {
		return fmt.Errorf("%v lost %v of remaining time, want exactly %v", t, got, d)
	}
	return nil
}

func (w *world) termNotRevoked(name, lease string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	if t.Reason() != simba.NotRevoked {
		return fmt.Errorf("%v has already been revoked (%s)", t, t.Reason())
	}
	select {
	case <-t.Done():
		return fmt.Errorf("%v: Done is closed", t)
	default:
		return nil
	}
}

func (w *world) firstTermInvalid(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	t, err := n.firstTerm(w.name(lease))
	if err != nil {
		return err
	}
	return invalid(t)
}

func (w *world) firstEndedSecondValid(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	ts := n.terms(w.name(lease))
	if len(ts) != 2 {
		return fmt.Errorf("node %s had %d terms of %s, want 2", name, len(ts), lease)
	}
	if err := invalid(ts[0]); err != nil {
		return err
	}
	if !ts[1].Valid() {
		return fmt.Errorf("the second term %v is not valid", ts[1])
	}
	return nil
}

func (w *world) twoTermsDiffer(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	ts := n.terms(w.name(lease))
	if len(ts) != 2 {
		return fmt.Errorf("node %s had %d terms of %s, want 2", name, len(ts), lease)
	}
	if ts[0] == ts[1] || ts[0].Token() == ts[1].Token() {
		return fmt.Errorf("the two terms are %v and %v", ts[0], ts[1])
	}
	return nil
}

func (w *world) listenerGiven(name, lease string, count int) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	ts := n.listener(w.name(lease)).terms()
	seen := make(map[*simba.Term]bool)
	tokens := make(map[uint64]bool)
	for _, t := range ts {
		seen[t] = true
		tokens[t.Token()] = true
	}
	if len(ts) != count || len(seen) != count || len(tokens) != count {
		return fmt.Errorf("the listener was given %d terms (%d distinct, %d distinct tokens), want %d different ones", len(ts), len(seen), len(tokens), count)
	}
	return nil
}

func (w *world) ensureValid(name, first, lease, outcome, phrase string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	if first != "" {
		if t, err = n.firstTerm(w.name(lease)); err != nil {
			return err
		}
	}
	d, err := n.dur(phrase)
	if err != nil {
		return err
	}
	got := t.EnsureValid(d)
	if outcome == "succeeds" {
		if got != nil {
			return fmt.Errorf("EnsureValid(%v) of %v: %w", d, t, got)
		}
		return nil
	}
	return matches(got, outcome[len("fails with "):])
}

func (w *world) ensureValidExact(name, lease string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	r := t.Remaining()
	if r <= time.Nanosecond {
		return fmt.Errorf("%v has %v remaining", t, r)
	}
	if err := t.EnsureValid(r - time.Nanosecond); err != nil {
		return fmt.Errorf("EnsureValid(%v) with %v remaining: %w", r-time.Nanosecond, r, err)
	}
	return matches(t.EnsureValid(r), "ErrTermExpired")
}

func (w *world) toldOnce(name, lease, reasonName string) error {
	want, err := reasonNamed(reasonName)
	if err != nil {
		return err
	}
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	l := n.listener(t.Name())
	if err := w.eventually(n.cfg().LeaseDuration, "the listener was not told", func() bool {
		return len(l.revocations(t)) > 0
	}); err != nil {
		return err
	}
	if _, err := n.revokedAt(t); err != nil {
		return err
	}
	return n.toldExactlyOnce(t, want)
}

// toldExactlyOnce checks that the listener of t was told reason once and
// the node published one Revoked event for it.
func (n *node) toldExactlyOnce(t *simba.Term, reason simba.RevokeReason) error {
	revs := n.listener(t.Name()).revocations(t)
	if len(revs) != 1 || revs[0].reason != reason {
		var got []string
		for _, r := range revs {
			got = append(got, r.reason.String())
		}
		return fmt.Errorf("the listener was told %v about %v, want %s once", got, t, reason)
	}
	events := 0
	for _, e := range n.events.of(simba.EventRevoked) {
		if e.Name == t.Name() && e.Token == t.Token() {
			events++
			if e.Reason != reason {
				return fmt.Errorf("the Revoked event of %v says %s, want %s", t, e.Reason, reason)
			}
		}
	}
	if events != 1 {
		return fmt.Errorf("%d Revoked events for %v, want 1", events, t)
	}
	return nil
}

func (w *world) stillToldOnce(name, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	return n.toldExactlyOnce(t, t.Reason())
}

// releasedWithTokens checks that node name released each lease of list
// with the token of its term, and only once the term had been revoked.
func (w *world) releasedWithTokens(name, list string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	leases := quoted.FindAllStringSubmatch(list, -1)
	if len(leases) == 0 {
		return fmt.Errorf("features: no quoted lease names in %q", list)
	}
	for _, m := range leases {
		lease := m[1]
		_, t, err := w.term(name, lease)
		if err != nil {
			return err
		}
		at, err := n.revokedAt(t)
		if err != nil {
			return err
		}
		var found bool
		for _, c := range n.rec.filter(memory.OpRelease, t.Name()) {
			if c.token != t.Token() {
				return fmt.Errorf("a release of %s carried token %d, not its term's %d", lease, c.token, t.Token())
			}
			if c.start.Before(at) {
				return fmt.Errorf("the release of %v was sent %v before the term was revoked", t, at.Sub(c.start))
			}
			found = true
		}
		if !found {
			return fmt.Errorf("node %s sent no release of %s", name, lease)
		}
	}
	return nil
}

func (w *world) endedAtKeepAlive(name, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	at, err := n.revokedAt(t)
	if err != nil {
		return err
	}
	taken, ok := w.takenAt[lease]
	if !ok {
		return fmt.Errorf("features: %s was not taken over", lease)
	}
	for _, c := range n.rec.filter(memory.OpKeepAlive, "") {
		if c.start.Before(taken) || c.end.IsZero() {
			continue
		}
		return w.near("the revocation after that keep-alive's reply", at.Sub(c.end), 0)
	}
	return fmt.Errorf("node %s sent no keep-alive after the take-over", name)
}

// wonAt returns when the acquire that won t got its answer.
func (n *node) wonAt(t *simba.Term) (time.Time, error) {
	for _, c := range n.rec.filter(memory.OpAcquire, t.Name()) {
		if c.won && c.token == t.Token() && c.session == t.Session() {
			return c.end, nil
		}
	}
	return time.Time{}, fmt.Errorf("no acquire of node %s won %v", n.name, t)
}

func (w *world) tokensIncrease(lease, a, b string) error {
	l := w.name(lease)
	type won struct {
		at time.Time
		t  *simba.Term
	}
	var all []won
	for _, name := range []string{a, b} {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		for _, t := range n.terms(l) {
			at, err := n.wonAt(t)
			if err != nil {
				return err
			}
			all = append(all, won{at, t})
		}
	}
	if len(all) < 4 {
		return fmt.Errorf("%d terms of %s, want at least 4", len(all), lease)
	}
	for i := range all {
		for j := range all {
			if all[i].at.Before(all[j].at) && all[i].t.Token() >= all[j].t.Token() {
				return fmt.Errorf("%v was won before %v but its token is not lower", all[i].t, all[j].t)
			}
		}
		if all[i].t.Token() == 0 {
			return fmt.Errorf("%v has token 0", all[i].t)
		}
	}
	return nil
}

// tokensConsistent waits up to a second for the events, which reach the
// listener on a goroutine of their own after the state change.
func (w *world) tokensConsistent() error {
	deadline := time.Now().Add(time.Second)
	for {
		err := w.tokensConsistentNow()
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *world) tokensConsistentNow() error {
	checked := 0
	for _, n := range w.nodes {
		for _, t := range n.allTerms() {
			elected, revoked := 0, 0
			for _, e := range n.events.of(0) {
				if e.Name != t.Name() || e.Session != t.Session() || e.Token != t.Token() {
					continue
				}
				switch e.Kind {
				case simba.EventElected:
					elected++
				case simba.EventRevoked:
					revoked++
					if e.Reason != t.Reason() {
						return fmt.Errorf("the Revoked event of %v says %s, the term %s", t, e.Reason, t.Reason())
					}
				}
			}
			ended := t.Reason() != simba.NotRevoked
			if elected != 1 || (ended && revoked != 1) || (!ended && revoked != 0) {
				return fmt.Errorf("%v (ended: %v) has %d Elected and %d Revoked events with its token", t, ended, elected, revoked)
			}
			if l, ok := n.listeners[t.Name()]; ok && l.told(t) {
				for _, r := range l.revocations(t) {
					if r.term.Token() != t.Token() {
						return fmt.Errorf("OnRevoked of %v shows token %d", t, r.term.Token())
					}
				}
			}
			checked++
		}
	}
	if checked == 0 {
		return fmt.Errorf("no term to check")
	}
	return nil
}

func (w *world) termInSecondSession(name, lease, owner string) error {
	_, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	o, err := w.node(owner)
	if err != nil {
		return err
	}
	ids := o.sessionIDs()
	if len(ids) < 2 || t.Session() != ids[1] {
		return fmt.Errorf("%v belongs to session %s; %s opened: %v", t, t.Session(), owner, ids)
	}
	return nil
}
