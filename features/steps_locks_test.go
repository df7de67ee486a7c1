package features

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// exactName reads a name cell of names.feature: a quoted name used as it
// is, or "<n> characters": a name of that length, made unique to the
// scenario.
func (w *world) exactName(cell string) (string, error) {
	if strings.HasPrefix(cell, `"`) {
		return strconv.Unquote(cell)
	}
	count, ok := strings.CutSuffix(cell, " characters")
	n, err := strconv.Atoi(count)
	if !ok || err != nil {
		return "", fmt.Errorf("features: cannot read the name %s", cell)
	}
	base := "n" + w.id + "-"
	if n < len(base) {
		return "", fmt.Errorf("features: %d characters is too short for a unique name", n)
	}
	return base + strings.Repeat("x", n-len(base)), nil
}

// acquire runs Acquire with a timeout of d and records the outcome.
func (n *node) acquire(lease string, d time.Duration) *acquisition {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	a := &acquisition{name: lease, start: time.Now(), done: make(chan struct{})}
	a.lt, a.err = n.client.Lock(lease).Acquire(ctx)
	a.end = time.Now()
	close(a.done)
	n.acqs[lease] = a
	if a.err == nil {
		n.held(lease, a.lt)
	}
	return a
}

// held notes a lock term the node was given.
func (n *node) held(lease string, lt *simba.LockTerm) {
	n.locks[lease] = append(n.locks[lease], lt)
	n.watch(lease, lt.Term)
}

func (w *world) holdsLock(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	a := n.acquire(w.name(lease), w.grace(n.cfg().LeaseDuration))
	return a.err
}

// lockName reads the lock a step names: "x", the scenario's lease x, or
// named <cell>, exactly the name an Examples cell gives (see exactName).
func (w *world) lockName(ref string) (lease string, exact bool, err error) {
	if cell, ok := strings.CutPrefix(ref, "named "); ok {
		lease, err = w.exactName(cell)
		return lease, true, err
	}
	return w.name(strings.Trim(ref, `"`)), false, nil
}

// acquires starts an Acquire of a lock, bounded by a duration (with the
// grace of real servers for a name used exactly as written).
func (w *world) acquires(name, ref, phrase string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	lease, exact, err := w.lockName(ref)
	if err != nil {
		return err
	}
	if exact {
		d = w.grace(d)
	}
	n.acquire(lease, d)
	return nil
}

func (w *world) beginsToAcquire(name, lease, phrase string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	l := w.name(lease)
	ctx, cancel := context.WithTimeout(w.ctx, d)
	a := &acquisition{name: l, start: time.Now(), cancel: cancel, done: make(chan struct{})}
	n.acqs[l] = a
	lock := n.client.Lock(l)
	n.goBackground(func() {
		defer cancel()
		lt, err := lock.Acquire(ctx)
		a.lt, a.err, a.end = lt, err, time.Now()
		close(a.done)
	})
	return nil
}

// finished waits for the node's latest acquisition of lease to end.
func (w *world) finished(n *node, lease string, within time.Duration) (*acquisition, error) {
	a, ok := n.acqs[lease]
	if !ok {
		return nil, fmt.Errorf("node %s made no acquisition of %s", n.name, lease)
	}
	err := w.eventually(within, "the acquisition did not end", func() bool { return isClosed(a.done) })
	return a, err
}

func (w *world) acquisitionFails(name, lease, errName, phrase string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	a, err := w.finished(n, w.name(lease), 6*n.cfg().LeaseDuration)
	if err != nil {
		return err
	}
	if a.lt != nil {
		return fmt.Errorf("the acquisition returned %v", a.lt.Term)
	}
	if err := matches(a.err, errName); err != nil {
		return err
	}
	if phrase != "" {
		d, err := n.dur(phrase)
		if err != nil {
			return err
		}
		if took := a.end.Sub(a.start); took < d {
			return fmt.Errorf("the acquisition gave up after %v, want no sooner than %v", took, d)
		}
	}
	return nil
}

func (w *world) acquisitionFailsBoth(name, lease, first, second string) error {
	if err := w.acquisitionFails(name, lease, first, ""); err != nil {
		return err
	}
	n, _ := w.node(name)
	return matches(n.acqs[w.name(lease)].err, second)
}

func (w *world) acquisitionReturns(phrase, name, lease string) error {
	n, d, err := w.nodeDur(name, phrase)
	if err != nil {
		return err
	}
	l := w.name(lease)
	a, err := w.finished(n, l, d)
	if err != nil {
		return err
	}
	if a.err != nil {
		return fmt.Errorf("the acquisition failed: %w", a.err)
	}
	n.held(l, a.lt)
	if !a.lt.Valid() {
		return fmt.Errorf("the acquisition returned %v, which is not valid", a.lt.Term)
	}
	return w.higherThanEarlier(l, a.lt.Term)
}

// release releases the node's oldest lock term of lease no step released.
func (n *node) release(lease string) error {
	for _, lt := range n.locks[lease] {
		if n.released[lt] {
			continue
		}
		n.released[lt] = true
		ctx, cancel := n.stepCtx()
		defer cancel()
		return lt.Release(ctx)
	}
	return fmt.Errorf("node %s holds no lock %s", n.name, lease)
}

func (w *world) releasesLock(name, ref string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	lease, _, err := w.lockName(ref)
	if err != nil {
		return err
	}
	return n.release(lease)
}

func (w *world) cancelsAcquisition(name, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	a, ok := n.acqs[w.name(lease)]
	if !ok || a.cancel == nil {
		return fmt.Errorf("node %s is not acquiring %s", name, lease)
	}
	a.cancel()
	return nil
}

// tryAcquire makes one attempt at lease and records the outcome.
func (n *node) tryAcquire(lease string) *lockCall {
	ctx, cancel := n.stepCtx()
	defer cancel()
	c := &lockCall{start: time.Now()}
	c.lt, c.err = n.client.Lock(lease).TryAcquire(ctx)
	c.end = time.Now()
	if c.err == nil {
		n.held(lease, c.lt)
	}
	return c
}

func (w *world) attempt(name, lease, outcome string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	c := n.tryAcquire(lease)
	n.lastCall = c
	if outcome == "succeeds" {
		if c.err != nil {
			return fmt.Errorf("node %s's attempt at %s failed: %w", name, lease, c.err)
		}
		if !c.lt.Valid() {
			return fmt.Errorf("node %s got %v, which is not valid", name, c.lt.Term)
		}
		return nil
	}
	if c.lt != nil {
		return fmt.Errorf("node %s got %v", name, c.lt.Term)
	}
	want := strings.Split(strings.TrimPrefix(outcome, "fails with "), " and ")
	for _, sentinel := range want {
		if err := matches(c.err, sentinel); err != nil {
			return err
		}
	}
	if !slices.Contains(want, "ErrBackendUnavailable") && errors.Is(c.err, simba.ErrBackendUnavailable) {
		return fmt.Errorf("node %s's attempt at %s reports an outage: %w", name, lease, c.err)
	}
	return nil
}

func (w *world) oneAttempt(name, ref, outcome string) error {
	lease, _, err := w.lockName(ref)
	if err != nil {
		return err
	}
	return w.attempt(name, lease, outcome)
}

func (w *world) holdsNamed(name, cell string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	lease, err := w.exactName(cell)
	if err != nil {
		return err
	}
	a, ok := n.acqs[lease]
	if !ok {
		return fmt.Errorf("node %s did not acquire %q", name, lease)
	}
	if a.err != nil {
		return fmt.Errorf("the acquisition of %q failed: %w", lease, a.err)
	}
	if !a.lt.Valid() || a.lt.Token() == 0 || a.lt.Name() != lease {
		return fmt.Errorf("node %s got %v (valid %v)", name, a.lt.Term, a.lt.Valid())
	}
	return nil
}

func (w *world) madeExactly(name string, count int, lease string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if got := len(n.rec.filter(memory.OpAcquire, w.name(lease))); got != count {
		return fmt.Errorf("node %s made %d attempts at %s, want %d", name, got, lease, count)
	}
	return nil
}

func (w *world) gaveUpAfterLease(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	if n.lastCall == nil {
		return fmt.Errorf("features: node %s made no attempt", name)
	}
	return w.near("giving up", n.lastCall.end.Sub(n.lastCall.start), w.lease(n.timing))
}

func (w *world) callsLock(name, method, cell, ctxKind string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	lease, err := strconv.Unquote(cell)
	if err != nil {
		return fmt.Errorf("features: the lock name must be quoted: %s", cell)
	}
	var ctx context.Context // nil for "a nil context"
	switch ctxKind {
	case "an expired context":
		c, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		ctx = c
	case "a timeout of 0":
		c, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		ctx = c
	case "a cancelled context":
		c, cancel := context.WithCancel(context.Background())
		cancel()
		ctx = c
	case "a live context":
		c, cancel := n.stepCtx()
		defer cancel()
		ctx = c
	}
	lock := n.client.Lock(w.name(lease))
	res := &lockCall{start: time.Now()}
	func() {
		defer func() { res.panicked = recover() }()
		if method == "Acquire" {
			res.lt, res.err = lock.Acquire(ctx)
		} else {
			res.lt, res.err = lock.TryAcquire(ctx)
		}
	}()
	res.end = time.Now()
	n.lastCall = res
	return nil
}

func (w *world) callReturned(name string, errName string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	c := n.lastCall
	switch {
	case c == nil:
		return fmt.Errorf("features: node %s made no call", name)
	case c.panicked != nil:
		return fmt.Errorf("the call panicked: %v", c.panicked)
	case c.lt != nil:
		return fmt.Errorf("the call returned %v", c.lt.Term)
	}
	return matches(c.err, errName)
}

// callWon checks that the last lock call returned a valid term, and keeps
// it as the node's lock, released with the node.
func (w *world) callWon(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	c := n.lastCall
	switch {
	case c == nil:
		return fmt.Errorf("features: node %s made no call", name)
	case c.panicked != nil:
		return fmt.Errorf("the call panicked: %v", c.panicked)
	case c.err != nil:
		return fmt.Errorf("the call failed: %w", c.err)
	case c.lt == nil || !c.lt.Valid():
		return fmt.Errorf("the call returned no valid term")
	}
	return nil
}

// lastLock returns node name and its latest lock term of lease.
func (w *world) lastLock(name, lease string) (*node, *simba.LockTerm, error) {
	n, err := w.node(name)
	if err != nil {
		return nil, nil, err
	}
	lts := n.locks[w.name(lease)]
	if len(lts) == 0 {
		return nil, nil, fmt.Errorf("node %s holds no lock %s", name, lease)
	}
	return n, lts[len(lts)-1], nil
}

func (w *world) handsOff(name, lease string) error {
	n, lt, err := w.lastLock(name, lease)
	if err != nil {
		return err
	}
	n.released[lt] = true
	done := make(chan error, 1)
	go func() {
		ctx, cancel := n.stepCtx()
		defer cancel()
		done <- lt.Release(ctx)
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("the release on another goroutine: %w", err)
	}
	return nil
}

func (w *world) releasesAsync(name, lease string) error {
	n, lt, err := w.lastLock(name, lease)
	if err != nil {
		return err
	}
	done := lt.ReleaseAsync()
	n.released[lt] = true
	if lt.Valid() || lt.Reason() != simba.Stopped {
		return fmt.Errorf("when ReleaseAsync returned: valid %v, reason %v; want ended with STOPPED", lt.Valid(), lt.Reason())
	}
	ctx, cancel := n.stepCtx()
	defer cancel()
	select {
	case err, ok := <-done:
		if !ok {
			return errors.New("the channel closed without the backend's answer")
		}
		if err != nil {
			return fmt.Errorf("the backend's answer: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no answer to the release: %w", ctx.Err())
	}
}

func (w *world) releaseAgain(name, lease string) error {
	n, t, err := w.term(name, lease)
	if err != nil {
		return err
	}
	var lt *simba.LockTerm
	for _, x := range n.locks[t.Name()] {
		if x.Term == t {
			lt = x
		}
	}
	if lt == nil {
		return fmt.Errorf("%v is not a lock term of node %s", t, name)
	}
	before := len(n.rec.filter(memory.OpRelease, t.Name()))
	ctx, cancel := n.stepCtx()
	defer cancel()
	if err := lt.Release(ctx); err != nil {
		return fmt.Errorf("releasing again: %w", err)
	}
	if err := lt.Close(); err != nil {
		return fmt.Errorf("closing: %w", err)
	}
	n.released[lt] = true
	if after := len(n.rec.filter(memory.OpRelease, t.Name())); after != before {
		return fmt.Errorf("%d release calls reached the backend", after-before)
	}
	return nil
}

// refusedName uses an invalid name for an election, a lock and a one-shot
// lock attempt: each must be refused with a *simba.NameError that quotes
// the name and says why, and no call about the name may reach the backend.
func (w *world) refusedName(name, cell, why string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	lease, err := w.exactName(cell)
	if err != nil {
		return err
	}
	ctx, cancel := n.stepCtx()
	defer cancel()
	_, lockErr := n.client.Lock(lease).Acquire(ctx)
	_, tryErr := n.client.Lock(lease).TryAcquire(ctx)
	uses := []error{n.client.Election(lease).Start(n.listener(lease)), lockErr, tryErr}
	for i, err := range uses {
		var ne *simba.NameError
		switch {
		case !errors.Is(err, simba.ErrInvalidName) || !errors.As(err, &ne):
			return fmt.Errorf("use %d: %w is not a *simba.NameError", i+1, err)
		case ne.Name != lease:
			return fmt.Errorf("use %d: the error names %q, not %q", i+1, ne.Name, lease)
		case !strings.Contains(err.Error(), quotedName(lease)) || !strings.Contains(err.Error(), why):
			return fmt.Errorf("use %d: %q does not quote the name and say %q", i+1, err.Error(), why)
		}
	}
	return n.noCallAbout(lease)
}

// quotedName is how an error quotes a lease name: whole up to 64 bytes,
// longer ones by their first 64 bytes and their length.
func quotedName(name string) string {
	const shown = 64
	if len(name) <= shown {
		return strconv.Quote(name)
	}
	return fmt.Sprintf("%s (first %d of %d bytes)", strconv.Quote(name[:shown]), shown, len(name))
}

// noCallAbout checks that the node made no backend call about lease and
// does not list it in its snapshot.
func (n *node) noCallAbout(lease string) error {
	for _, c := range n.rec.snapshot() {
		switch c.op {
		case memory.OpAcquire, memory.OpRelease, memory.OpWatchRelease, memory.OpJoinGroup, memory.OpLeaveGroup:
			if c.name == lease {
				return fmt.Errorf("node %s made a %s call about %q", n.name, c.op, lease)
			}
		}
	}
	for _, ls := range n.client.Snapshot().Leases {
		if ls.Name == lease {
			return fmt.Errorf("the snapshot lists %q", lease)
		}
	}
	return nil
}
