package features

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// holderNow asks node asker who holds lease now.
func (w *world) holderNow(asker, lease string) (simba.Holder, bool, error) {
	n, err := w.node(asker)
	if err != nil {
		return simba.Holder{}, false, err
	}
	ctx, cancel := n.stepCtx()
	defer cancel()
	h, ok, err := n.client.Holder(ctx, w.name(lease))
	if err != nil {
		return simba.Holder{}, false, fmt.Errorf("%s asked who holds %s: %w", asker, lease, err)
	}
	return h, ok, nil
}

func (w *world) seesHolder(asker, holder, lease string) error {
	h, ok, err := w.holderNow(asker, lease)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s sees nobody holding %s, want %s", asker, lease, holder)
	}
	return w.isTermOf(h, holder, lease)
}

// isTermOf checks that h is node name's current term of lease: the
// session, the identity and the token of the term; and, when the backend
// records it, that the term began while the attempt that won it was in
// flight.
func (w *world) isTermOf(h simba.Holder, name, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	want := simba.Holder{Session: t.Session(), Identity: n.client.Identity(), Token: t.Token(), Since: h.Since}
	if h != want {
		return fmt.Errorf("the holder of %s is %+v, want %s's term: %+v", lease, h, name, want)
	}
	if h.Since.IsZero() {
		return nil
	}
	for _, c := range n.rec.filter(memory.OpAcquire, w.name(lease)) {
		if !c.won || c.token != t.Token() || c.session != t.Session() {
			continue
		}
		tol := w.tolerance()
		if h.Since.Before(c.start.Add(-tol)) || h.Since.After(c.answered.Add(tol)) {
			return fmt.Errorf("the holder of %s is there since %v, outside the attempt that won its term (%v to %v)",
				lease, h.Since, c.start, c.answered)
		}
		return nil
	}
	return fmt.Errorf("features: no winning attempt of %s at %s with token %d was recorded", name, lease, t.Token())
}

func (w *world) seesNobody(asker, lease string) error {
	h, ok, err := w.holderNow(asker, lease)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("%s sees %s held by %+v, want nobody", asker, lease, h)
	}
	return nil
}

// holderWatch is what one ObserveHolder of a node reported.
type holderWatch struct {
	mu   sync.Mutex
	seen []holderSeen
	err  error // what ObserveHolder returned, before the scenario ended
	done bool
}

// holderSeen is one report of ObserveHolder.
type holderSeen struct {
	at   time.Time
	h    simba.Holder
	held bool
}

type holderWatchKey struct {
	n     *node
	lease string // as the backend knows it
}

// holderWatches holds the running holderWatch values by node and lease:
// the node and the world have no field for them. An entry is removed when
// its ObserveHolder returns at the end of the scenario.
var holderWatches sync.Map

func (w *world) observesHolder(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	key := holderWatchKey{n, w.name(lease)}
	hw := &holderWatch{}
	if _, dup := holderWatches.LoadOrStore(key, hw); dup {
		return fmt.Errorf("features: %s already observes the holder of %s", name, lease)
	}
	ctx := w.ctx
	n.goBackground(func() {
		err := n.client.ObserveHolder(ctx, key.lease, func(h simba.Holder, held bool) {
			hw.mu.Lock()
			defer hw.mu.Unlock()
			hw.seen = append(hw.seen, holderSeen{at: time.Now(), h: h, held: held})
		})
		if ctx.Err() != nil {
			holderWatches.Delete(key)
			return
		}
		hw.mu.Lock()
		defer hw.mu.Unlock()
		hw.err, hw.done = err, true
	})
	return nil
}

// observed returns a copy of what node name's ObserveHolder of lease has
// reported so far, and an error once it returned.
func (w *world) observed(name, lease string) ([]holderSeen, error) {
	n, err := w.node(name)
	if err != nil {
		return nil, err
	}
	v, ok := holderWatches.Load(holderWatchKey{n, w.name(lease)})
	if !ok {
		return nil, fmt.Errorf("features: %s does not observe the holder of %s", name, lease)
	}
	hw := v.(*holderWatch)
	hw.mu.Lock()
	defer hw.mu.Unlock()
	seen := append([]holderSeen(nil), hw.seen...)
	if hw.done {
		return seen, fmt.Errorf("%s's ObserveHolder of %s returned: %w", name, lease, hw.err)
	}
	return seen, nil
}

// matches reports whether s is what who ("nobody" or a node) holding lease
// looks like now.
func (w *world) matches(s holderSeen, who, lease string) bool {
	if who == "nobody" {
		return !s.held
	}
	return s.held && w.isTermOf(s.h, who, lease) == nil
}

func (w *world) hasObserved(phrase, name, who, lease string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	var last error
	err = w.eventually(d, fmt.Sprintf("%s has not observed that %s holds %s", n.name, who, lease), func() bool {
		seen, err := w.observed(name, lease)
		if last = err; err != nil {
			return true
		}
		return len(seen) > 0 && w.matches(seen[len(seen)-1], who, lease)
	})
	if last != nil {
		return last
	}
	if err != nil {
		if seen, _ := w.observed(name, lease); len(seen) > 0 {
			err = fmt.Errorf("%w; the last report was %s", err, describeSeen(seen[len(seen)-1]))
		}
	}
	return err
}

// observedInOrder checks every report of ObserveHolder, in order, against
// a list such as "nobody, A, nobody": each node by the identity of its
// client. Consecutive reports differ, or ObserveHolder reported no change.
func (w *world) observedInOrder(name, lease, list string) error {
	seen, err := w.observed(name, lease)
	if err != nil {
		return err
	}
	want := strings.Split(list, ", ")
	got := make([]string, len(seen))
	for i, s := range seen {
		got[i] = describeSeen(s)
	}
	if len(seen) != len(want) {
		return fmt.Errorf("%s observed %d holders of %s (%s), want %d (%s)", name, len(seen), lease, strings.Join(got, ", "), len(want), list)
	}
	for i, who := range want {
		s := seen[i]
		ok := !s.held
		if who != "nobody" {
			n, err := w.node(who)
			if err != nil {
				return err
			}
			ok = s.held && s.h.Identity == n.client.Identity()
		}
		if !ok {
			return fmt.Errorf("report %d of %s about %s is %s, want %s (all: %s)", i+1, name, lease, got[i], who, strings.Join(got, ", "))
		}
		if i > 0 && s.held == seen[i-1].held && s.h == seen[i-1].h {
			return errors.New("ObserveHolder reported the same holder twice in a row: " + strings.Join(got, ", "))
		}
	}
	return nil
}

func describeSeen(s holderSeen) string {
	if !s.held {
		return "nobody"
	}
	return fmt.Sprintf("%q (session %s, token %d)", s.h.Identity, s.h.Session, s.h.Token)
}
