package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// testOpenSession: ids are non-empty and never repeat, grants lie in
// (0, Lease], and a fresh session owns nothing, not even the lease the
// session opened before it holds, which it asks about as unsure.
func testOpenSession(e *env) {
	a, b := e.node(), e.node()
	n := e.name("n")
	seen := make(map[simba.SessionID]bool)
	var prev *session
	for i := range 6 {
		node := a
		if i%2 == 1 {
			node = b
		}
		s := e.open(node)
		if seen[s.id] {
			e.t.Fatalf("OpenSession returned session id %s twice", s.id)
		}
		seen[s.id] = true
		s.touched[n] = true
		r := s.keepAlive()
		s.wantLeases(r, nil, "a fresh session owns no lease")
		s.wantGroups(r, nil, "a fresh session is in no group")
		if prev != nil {
			prev.release(n, prev.held[n])
		}
		s.win(n)
		prev = s
	}
}

// testTokensIncrease: token > 0 and strictly increasing across the terms of
// a name, whoever wins them (R-TERM-2).
func testTokensIncrease(e *env) {
	a, b := e.open(e.node()), e.open(e.node())
	n := e.name("n")
	var last uint64
	next := func(s *session, how string) {
		e.t.Helper()
		last = s.winAbove(n, last, how)
	}
	next(a, "in the first term")
	next(a, "when the owner acquires again (a new term)")
	a.wantLeases(a.keepAlive(), map[string]uint64{n: last}, "the keep-alive lists the newest term")
	a.release(n, last)
	next(b, "by another session after a release")
	b.close()
	next(a, "by the first session after the owner closed")
	c := e.open(e.node())
	a.release(n, last)
	next(c, "by a third session")
	next(c, "when the third session acquires again")
}

// testTokenConstant: keep-alives do not change the token of a term, and
// failed attempts of other sessions do not either.
func testTokenConstant(e *env) {
	a, b := e.open(e.node()), e.open(e.node())
	n := e.name("n")
	tok := a.win(n)
	for range 3 {
		time.Sleep(e.h.Lease / 10)
		b.lose(n, "the lease is held by a live session")
		a.wantLeases(a.keepAlive(), map[string]uint64{n: tok}, "the token is constant within a term")
	}
}

// testHeldElsewhere: a lease held by a live session is not won by another,
// even one on the same node; sessions own leases, not nodes.
func testHeldElsewhere(e *env) {
	na := e.node()
	a, b, c := e.open(na), e.open(e.node()), e.open(na)
	n := e.name("n")
	tok := a.win(n)
	b.lose(n, "another node's live session holds it")
	c.lose(n, "another session of the same node holds it")
	b.wantLeases(b.keepAlive(), nil, "a lost attempt owns nothing")
	a.wantLeases(a.keepAlive(), map[string]uint64{n: tok}, "the owner keeps its term")
}

// testReleaseStaleToken: a release must carry the current term's token; a
// late release of an older term does not free the newer one (R-TERM-7).
func testReleaseStaleToken(e *env) {
	a, b := e.open(e.node()), e.open(e.node())
	n := e.name("n")
	old := a.win(n)
	cur := a.win(n)
	a.release(n, old)
	a.wantLeases(a.keepAlive(), map[string]uint64{n: cur}, "a release with the previous term's token is a no-op")
	b.lose(n, "a release with a stale token must not free the lease")
	a.release(n, cur+1000)
	b.lose(n, "a release with a token above the current one must not free the lease")
	a.release(n, cur)
	b.winAbove(n, cur, "after the owner released it")
}

// testReleaseByOther: only the owner can release.
func testReleaseByOther(e *env) {
	a, b := e.open(e.node()), e.open(e.node())
	n := e.name("n")
	tok := a.win(n)
	b.release(n, tok)
	b.release(n, 0)
	b.lose(n, "a release by a session that does not own the lease is a no-op")
	a.wantLeases(a.keepAlive(), map[string]uint64{n: tok}, "another session's release must not end the term")
}

// testKeepAliveDropsLost: a keep-alive lists only the leases the session
// owns now, so a lease another session took is gone from it (R-TERM-8).
func testKeepAliveDropsLost(e *env) {
	a, b := e.open(e.node()), e.open(e.node())
	n, m := e.name("n"), e.name("m")
	t1 := a.win(n)
	tm := a.win(m)
	a.release(n, t1)
	t2 := b.win(n)
	stale := map[string]uint64{n: t1, m: tm}
	r := a.keepAliveWith(simba.KeepAliveRequest{Lease: a.lease, Held: stale, Generation: 1})
	a.wantLost(r, stale, map[string]uint64{m: tm}, "a held lease now owned by another session is reported lost, with no lease unsure")
	a.wantLeases(a.keepAlive(), map[string]uint64{m: tm}, "a lease now owned by another session is no longer listed")
	b.wantLeases(b.keepAlive(), map[string]uint64{n: t2}, "the new owner's keep-alive lists its term")
	b.close()
	t3 := a.win(n)
	a.wantLeases(a.keepAlive(), map[string]uint64{n: t3, m: tm}, "a lease won back is listed with its new token")
}

// testCloseFrees: CloseSession frees every lease and membership at once
// and the session stays dead (R-SES-4).
func testCloseFrees(e *env) {
	f := e.doomed()
	f.s.close()
	f.peer.winAbove(f.n1, f.t1, "after the owner closed")
	f.peer.winAbove(f.n2, f.t2, "after the owner closed")
	f.peer.wantGroups(f.peer.keepAlive(), map[string]int{f.g: 1}, "a closed session is no longer a member")
	f.s.wantExpired(f.n3, "after CloseSession")
	f.s.close() // closing a dead session is a no-op
}

// doomed is the fixture of the close and expiry checks: a session s that
// owns n1 and n2 and shares group g with peer; n3 is a free name.
type doomed struct {
	s, peer       *session
	n1, n2, n3, g string
	t1, t2        uint64
}

func (e *env) doomed() doomed {
	e.t.Helper()
	f := doomed{s: e.open(e.node()), peer: e.open(e.node()),
		n1: e.name("n1"), n2: e.name("n2"), n3: e.name("n3"), g: e.name("g")}
	f.t1, f.t2 = f.s.win(f.n1), f.s.win(f.n2)
	f.s.joinWant(f.g, 1, "the first member")
	f.peer.joinWant(f.g, 2, "the second member")
	return f
}

// testExpiry: a session that is not kept alive keeps its leases for the
// validity it was granted, then expires: its leases are free, its
// memberships gone, and it never comes back (R-SES-3).
func testExpiry(e *env) {
	f := e.doomed()
	x, y := f.s, f.peer
	n1, n2, n3, g, t1, t2 := f.n1, f.n2, f.n3, f.g, f.t1, f.t2
	sent := time.Now()
	granted := x.keepAlive().Remaining // the last sign of life of x
	due := sent.Add(granted)
	// The store may free the lease a little late (Zookeeper checks expiry
	// once per tick), never early: x may trust its lease until due.
	giveUp := due.Add(max(e.h.Lease, time.Second))
	var early time.Duration // clock rounding of real servers
	if !e.h.Synctest {
		early = e.h.Lease / 100
	}
	step := e.h.Lease / 20
	renewed := time.Now()
	for {
		if time.Since(renewed) >= e.h.Lease/4 {
			y.keepAlive()
			renewed = time.Now()
		}
		r := y.acquire(n1)
		at := time.Now()
		if r.Won {
			if at.Before(due.Add(-early)) {
				e.t.Fatalf("the lease of a session granted %v was taken over %v after its last keep-alive was sent: expired early", granted, at.Sub(sent))
			}
			if r.Token <= t1 {
				e.t.Fatalf("token %d after expiry, want more than %d", r.Token, t1)
			}
			break
		}
		if r.Token != 0 {
			e.t.Fatalf("Acquire lost with token %d, want 0", r.Token)
		}
		if at.After(giveUp) {
			e.t.Fatalf("a session granted %v still owns its lease %v after its last keep-alive was sent", granted, at.Sub(sent))
		}
		time.Sleep(step)
	}
	x.wantExpired(n3, "once expired")
	y.winAbove(n2, t2, "after the owner expired")
	y.wantGroups(y.keepAlive(), map[string]int{g: 1}, "an expired session is no longer a member")

	time.Sleep(e.h.Lease / 2)
	x.wantExpired(n3, "half a lease after it expired (never revived)")
	y.wantGroups(y.keepAlive(), map[string]int{g: 1}, "an expired session stays out of its groups")
	z := e.open(e.node())
	if z.id == x.id {
		e.t.Fatalf("a new session got the id %s of an expired one", x.id)
	}
	z.win(n3)
}

// testNames: every valid name works and comes back unchanged in the
// keep-alive reply (R-NAME-1); names differing only in case are distinct.
func testNames(e *env) {
	a, b := e.open(e.node()), e.open(e.node())
	long := e.prefix + "Az09._:-"
	long += strings.Repeat("aZ9.-_:", simba.MaxNameLength)[:simba.MaxNameLength-len(long)]
	unique := []string{
		long,
		e.name("a..b"),
		e.name("..."),
		e.name(":colon:"),
		e.name("-dash-"),
		e.name("_under_"),
		e.name("dot.ended."),
		e.name("CASE"),
		e.name("case"),
		"-" + e.prefix,
		":" + e.prefix,
		"." + e.prefix,
		"_" + e.prefix,
	}
	// Names that cannot carry a random part may be held for a while by a
	// run that crashed: wait for them.
	shared := []string{"a..b", "...", "_", "Z"}
	for _, n := range append(unique, shared...) {
		if err := simba.ValidateName(n); err != nil {
			e.t.Fatalf("suite bug: %v", err)
		}
	}
	owned := make(map[string]uint64)
	for _, n := range unique {
		owned[n] = a.win(n)
	}
	for _, n := range shared {
		owned[n] = a.winEventually(n)
	}
	a.wantLeases(a.keepAlive(), owned, "every valid name is listed exactly as acquired")
	for n, tok := range owned {
		b.lose(n, "held by another session")
		a.release(n, tok)
		b.winAbove(n, tok, "after the owner released it")
	}
	for _, g := range []string{long, e.name("..."), e.name("CASE"), e.name("case")} {
		a.joinWant(g, 1, "a new group")
	}
	a.wantGroups(a.keepAlive(), map[string]int{long: 1, e.name("..."): 1, e.name("CASE"): 1, e.name("case"): 1},
		"every valid group name is listed exactly as joined")
}

// winEventually acquires a name that other runs may use, waiting up to
// two leases for a crashed run's session to expire.
func (s *session) winEventually(name string) uint64 {
	s.e.t.Helper()
	giveUp := time.Now().Add(2*s.e.h.Lease + time.Second)
	for {
		if r := s.acquire(name); r.Won && r.Token > 0 {
			return r.Token
		}
		if time.Now().After(giveUp) {
			s.e.t.Fatalf("Acquire(%q) not won for two leases: held by another run?", name)
		}
		time.Sleep(s.e.h.Lease / 10)
		s.keepAlive()
	}
}

// testGroups: join returns the member count, joining twice counts once,
// keep-alive reports only the joined groups, leave ends membership.
func testGroups(e *env) {
	a, b, c := e.open(e.node()), e.open(e.node()), e.open(e.node())
	g, h := e.name("g"), e.name("h")
	a.joinWant(g, 1, "the first member")
	b.joinWant(g, 2, "the second member")
	a.joinWant(g, 2, "joining twice counts once")
	c.joinWant(h, 1, "another group counts apart")
	a.wantGroups(a.keepAlive(), map[string]int{g: 2}, "only joined groups, with their member counts")
	c.wantGroups(c.keepAlive(), map[string]int{h: 1}, "only joined groups, with their member counts")

	tok := a.win(g) // a lease of the same name as a group is independent of it
	r := a.keepAlive()
	a.wantLeases(r, map[string]uint64{g: tok}, "a lease named like a group")
	a.wantGroups(r, map[string]int{g: 2}, "a lease named like a group does not change the group")

	b.leave(g)
	a.wantGroups(a.keepAlive(), map[string]int{g: 1}, "a member left")
	b.wantGroups(b.keepAlive(), nil, "a session that left is in no group")
	b.leave(g) // leaving twice is a no-op
	b.leave(h) // leaving a group never joined is a no-op
	c.wantGroups(c.keepAlive(), map[string]int{h: 1}, "a non-member's leave changes nothing")
	b.joinWant(g, 2, "joining again after leaving")
}

// testWatchRelease: when the backend broadcasts releases, a watch on
// another node fires on release and on the owner's CloseSession.
func testWatchRelease(e *env) {
	na, nb := e.node(), e.node()
	w, ok := nb.(simba.ReleaseNotifier)
	if !ok {
		e.t.Skip("the backend does not implement simba.ReleaseNotifier")
	}
	a := e.open(na)
	n := e.name("n")
	// A backend that finds at run time that its broadcasts do not reach
	// it (PostgreSQL behind a pooler in transaction mode) refuses watches
	// with ErrNotSupported once it knows; the first one may fire at once.
	if err := probeWatch(e, w, n); err != nil {
		e.t.Skipf("the backend broadcasts no releases here: %v", err)
	}
	fired := func(ch <-chan struct{}, why string) {
		e.t.Helper()
		select {
		case <-ch:
		case <-time.After(e.h.Lease):
			e.t.Fatalf("WatchRelease(%q) not fired %v after %s", n, e.h.Lease, why)
		}
	}

	tok := a.win(n)
	ch := e.watchHeld(nb, n)
	a.release(n, tok)
	fired(ch, "the owner released it")

	a.win(n)
	ch = e.watchHeld(nb, n)
	a.close()
	fired(ch, "the owner's session was closed")

	// A watch dropped by its context must not leak; the next one works.
	ctx, cancel := context.WithCancel(e.t.Context())
	if _, err := w.WatchRelease(ctx, n); err != nil {
		e.t.Fatalf("WatchRelease(%q): %v", n, err)
	}
	cancel()
	b := e.open(na)
	tok = b.win(n)
	ch = e.watchHeld(nb, n)
	b.release(n, tok)
	fired(ch, "a release after another watch was cancelled")
}

// probeWatch makes two watches of n and returns the error of the first
// one refused with ErrNotSupported, nil when neither is. The first watch
// of such a backend may still be accepted, while it finds out.
func probeWatch(e *env, w simba.ReleaseNotifier, n string) error {
	for range 2 {
		ctx, cancel := context.WithCancel(e.t.Context())
		_, err := w.WatchRelease(ctx, n)
		cancel()
		if errors.Is(err, simba.ErrNotSupported) {
			return err
		}
		if err != nil {
			e.t.Fatalf("WatchRelease(%q): %v", n, err)
		}
	}
	return nil
}

// testConcurrentAcquire: sessions on many nodes race for one name; every
// round has exactly one winner and the tokens grow round after round.
// Rounds end by a release, by the winner's close, or by its expiry.
func testConcurrentAcquire(e *env) {
	const racers, rounds = 20, 6
	ss := make([]*session, racers)
	for i := range ss {
		ss[i] = e.openLong(e.node())
	}
	n := e.name("n")
	var last uint64
	for round := range rounds {
		for _, s := range ss {
			s.touched[n] = true // the race's calls are the suite's own
		}
		results := make([]simba.AcquireResult, racers)
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range ss {
			wg.Go(func() {
				ctx, cancel := e.ctx()
				defer cancel()
				<-start
				results[i], errs[i] = s.b.Acquire(ctx, s.id, n)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, r := range results {
			switch {
			case errs[i] != nil:
				e.t.Fatalf("round %d: Acquire by racer %d: %v", round, i, errs[i])
			case r.Won && winner >= 0:
				e.t.Fatalf("round %d: racers %d and %d both won %q (tokens %d and %d)", round, winner, i, n, results[winner].Token, r.Token)
			case r.Won:
				winner = i
			case r.Token != 0:
				e.t.Fatalf("round %d: racer %d lost with token %d, want 0", round, i, r.Token)
			}
		}
		if winner < 0 {
			e.t.Fatalf("round %d: none of %d racers won a free lease", round, racers)
		}
		tok := results[winner].Token
		if tok <= last {
			e.t.Fatalf("round %d: winner's token %d, want more than the previous round's %d", round, tok, last)
		}
		last = tok
		for i, s := range ss {
			var want map[string]uint64
			if i == winner {
				want = map[string]uint64{n: tok}
			}
			s.wantLeases(s.keepAlive(), want, "only the winner owns the lease")
		}
		// Every way a lease becomes free is raced for: a release, the
		// winner's close, and with Harness.Expire its expiry.
		switch w := ss[winner]; {
		case round%3 == 0:
			w.release(n, tok)
		case round%3 == 2 && e.h.Expire != nil:
			e.h.Expire(e.t, w.id)
			ss[winner] = e.openLong(w.b)
		default:
			w.close()
			ss[winner] = e.openLong(w.b)
		}
	}
}

// testReleaseBesideReacquire: the engine may send the release of a term and
// the next acquire of the same name by the same session at the same time
// (a lock handed over, an orphan released while a new attempt starts),
// while other sessions contend. Each call must be atomic with respect to
// the other and to the other sessions' calls: the release of term T ends T
// or nothing, never the term the concurrent acquire starts nor one another
// session wins. Whatever order the three calls take, at most one acquire
// wins, the winner owns the lease afterwards at the token it was given,
// and tokens keep growing. When neither wins (an acquire that read the
// owner before the release and found the lease free after it: a lost
// attempt, which the engine retries), the lease must be free.
func testReleaseBesideReacquire(e *env) {
	const rounds = 50
	a, b := e.open(e.node()), e.open(e.node())
	n := e.name("n")
	tok := a.win(n)
	b.touched[n] = true
	last := tok
	for round := range rounds {
		ctx, cancel := e.ctx()
		var (
			relErr, aErr, bErr error
			ra, rb             simba.AcquireResult
		)
		calls := []func(){
			func() { relErr = a.b.Release(ctx, a.id, n, tok) },
			func() { ra, aErr = a.b.Acquire(ctx, a.id, n) },
			func() { rb, bErr = b.b.Acquire(ctx, b.id, n) },
		}
		var wg sync.WaitGroup
		for i := range calls { // a different order of start each round
			wg.Go(calls[(round+i)%len(calls)])
		}
		wg.Wait()
		cancel()
		switch {
		case relErr != nil:
			e.t.Fatalf("round %d: Release(%s, %q, %d) beside its Acquire: %v", round, a.id, n, tok, relErr)
		case aErr != nil:
			e.t.Fatalf("round %d: Acquire(%s, %q) beside the release of its term %d: %v", round, a.id, n, tok, aErr)
		case bErr != nil:
			e.t.Fatalf("round %d: Acquire(%s, %q) by the contender: %v", round, b.id, n, bErr)
		case ra.Won && rb.Won:
			e.t.Fatalf("round %d: both sessions won %q: the owner again with token %d, the contender with %d", round, n, ra.Token, rb.Token)
		case !ra.Won && ra.Token != 0, !rb.Won && rb.Token != 0:
			e.t.Fatalf("round %d: an acquire lost with a token (owner's %d, contender's %d), want token 0 when not won", round, ra.Token, rb.Token)
		}
		if won := max(ra.Token, rb.Token); won != 0 && won <= last {
			e.t.Fatalf("round %d: %q won with token %d, want more than the earlier term's %d", round, n, won, last)
		}
		switch {
		case !ra.Won && !rb.Won:
			e.t.Logf("round %d: neither acquire won %q beside the release (a lost attempt)", round, n)
			why := fmt.Sprintf("round %d: the owner released its term and neither acquire won: the lease must be free", round)
			a.wantLeases(a.keepAlive(), nil, why)
			b.wantLeases(b.keepAlive(), nil, why)
			tb := b.winAbove(n, last, "after a release that neither concurrent acquire won")
			b.release(n, tb)
			tok = a.winAbove(n, tb, "after the contender released")
		case ra.Won:
			a.wantLeases(a.keepAlive(), map[string]uint64{n: ra.Token}, fmt.Sprintf(
				"round %d: the owner acquired again while releasing its previous term: the release must not end the new term", round))
			b.lose(n, fmt.Sprintf("round %d: the owner's new term holds the lease", round))
			tok = ra.Token
		default:
			b.wantLeases(b.keepAlive(), map[string]uint64{n: rb.Token}, fmt.Sprintf(
				"round %d: the contender won after the owner released: the owner's concurrent calls must not end its term", round))
			a.wantLeases(a.keepAlive(), nil, fmt.Sprintf("round %d: the owner released its term and lost the lease to the contender", round))
			a.lose(n, fmt.Sprintf("round %d: the contender's term holds the lease", round))
			b.release(n, rb.Token)
			tok = a.winAbove(n, rb.Token, "after the contender released")
		}
		last = tok
	}
}
