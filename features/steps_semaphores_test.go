package features

import (
	"context"
	"fmt"
	"strconv"
	"time"

	simba "github.com/simba-go/simba/core"
)

// Semaphores (R-SEM-*): a node's permits of a semaphore are kept with its
// lock terms, under the key "permit <name>", in the order won.

func permitKey(sem string) string { return "permit " + sem }

// semaphore returns node name's semaphore sem of n permits.
func (w *world) semaphore(name, sem, n string) (*node, *simba.Semaphore, error) {
	nd, err := w.node(name)
	if err != nil {
		return nil, nil, err
	}
	permits, err := strconv.Atoi(n)
	if err != nil {
		return nil, nil, err
	}
	return nd, nd.client.Semaphore(w.name(sem), permits), nil
}

func (w *world) holdsPermit(name, sem, n string) error {
	nd, s, err := w.semaphore(name, sem, n)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.grace(nd.cfg().LeaseDuration))
	defer cancel()
	lt, err := s.Acquire(ctx)
	if err != nil {
		return err
	}
	nd.held(permitKey(s.Name()), lt)
	return w.aboveEarlierPermits(s.Name(), lt)
}

// permitFails makes one TryAcquire, or one Acquire that must fail at once,
// and checks its error.
func (w *world) permitFails(name, call, sem, n, errName string) error {
	nd, s, err := w.semaphore(name, sem, n)
	if err != nil {
		return err
	}
	ctx, cancel := nd.stepCtx()
	defer cancel()
	start := time.Now()
	var lt *simba.LockTerm
	if call == "makes one attempt at" {
		lt, err = s.TryAcquire(ctx)
	} else {
		lt, err = s.Acquire(ctx)
		if took := time.Since(start); err != nil && took > w.grace(nd.cfg().RenewInterval) {
			return fmt.Errorf("the acquisition failed after %v, want at once: %w", took, err)
		}
	}
	if lt != nil {
		nd.held(permitKey(s.Name()), lt)
		return fmt.Errorf("got the permit %s with token %d", lt.Name(), lt.Token())
	}
	return matches(err, errName)
}

func (w *world) beginsToAcquirePermit(name, sem, n, phrase string) error {
	nd, s, err := w.semaphore(name, sem, n)
	if err != nil {
		return err
	}
	d, err := nd.dur(phrase)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(w.ctx, d)
	a := &acquisition{name: s.Name(), start: time.Now(), cancel: cancel, done: make(chan struct{})}
	nd.acqs[permitKey(s.Name())] = a
	nd.goBackground(func() {
		defer cancel()
		lt, err := s.Acquire(ctx)
		a.lt, a.err, a.end = lt, err, time.Now()
		close(a.done)
	})
	return nil
}

func (w *world) releasesPermit(name, sem string) error {
	nd, err := w.node(name)
	if err != nil {
		return err
	}
	return nd.release(permitKey(w.name(sem)))
}

// gotPermit waits for the node's acquisition of a permit of sem, which
// must return a valid permit whose token is above every earlier one of
// the semaphore; with other, once that node's permits were no longer valid.
func (w *world) gotPermit(phrase, name, sem, other string) error {
	nd, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	key := permitKey(w.name(sem))
	a, err := w.finished(nd, key, d)
	if err != nil {
		return err
	}
	if a.err != nil {
		return fmt.Errorf("the acquisition failed: %w", a.err)
	}
	if other != "" {
		o, err := w.node(other)
		if err != nil {
			return err
		}
		for _, lt := range o.locks[key] {
			if lt.Valid() {
				return fmt.Errorf("%s's permit %s (token %d) is still valid beside %s's %s", other, lt.Name(), lt.Token(), name, a.lt.Name())
			}
		}
	}
	nd.held(key, a.lt)
	if !a.lt.Valid() {
		return fmt.Errorf("the acquisition returned %v, which is not valid", a.lt.Term)
	}
	return w.aboveEarlierPermits(w.name(sem), a.lt)
}

// aboveEarlierPermits checks that lt's token is above that of every other
// permit of sem any node was given.
func (w *world) aboveEarlierPermits(sem string, lt *simba.LockTerm) error {
	for _, nd := range w.nodes {
		for _, o := range nd.locks[permitKey(sem)] {
			if o != lt && o.Token() >= lt.Token() {
				return fmt.Errorf("permit %s has token %d, not above the earlier permit %s's %d", lt.Name(), lt.Token(), o.Name(), o.Token())
			}
		}
	}
	return nil
}

// validPermits checks how many of the permits of sem the nodes hold are
// valid now; the list of nodes only reads the sentence.
func (w *world) validPermits(_, count, sem string) error {
	want, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	got := 0
	for _, nd := range w.nodes {
		for _, lt := range nd.locks[permitKey(w.name(sem))] {
			if lt.Valid() {
				got++
			}
		}
	}
	if got != want {
		return fmt.Errorf("%d valid permits of %s, want %d", got, sem, want)
	}
	return nil
}
