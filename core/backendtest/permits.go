package backendtest

import (
	"errors"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// permitter returns the backend's simba.PermitAcquirer, skipping the check
// when it has none.
func (e *env) permitter(b simba.Backend) simba.PermitAcquirer {
	p, ok := b.(simba.PermitAcquirer)
	if !ok {
		e.t.Skip("the backend does not implement simba.PermitAcquirer")
	}
	return p
}

// permit calls AcquirePermit for slot of semaphore sem with n permits and
// fails on an error other than want (nil: none expected). A won slot is
// held from then on, as the engine would hold it.
func (s *session) permit(sem string, n, slot int, want error) simba.AcquireResult {
	s.e.t.Helper()
	ctx, cancel := s.e.ctx()
	defer cancel()
	name := simba.PermitName(sem, slot)
	s.touched[name] = true
	r, err := s.e.permitter(s.b).AcquirePermit(ctx, s.id, simba.Permit{Semaphore: sem, Permits: n, Slot: slot})
	switch {
	case want != nil && !errors.Is(err, want):
		s.e.t.Fatalf("AcquirePermit(%s, %q, %d permits, slot %d) = %+v, %v; want an error matching %v", s.id, sem, n, slot, r, err, want)
	case want == nil && err != nil:
		s.e.t.Fatalf("AcquirePermit(%s, %q, %d permits, slot %d): %v", s.id, sem, n, slot, err)
	case err != nil:
	case r.Won && r.Token == 0:
		s.e.t.Fatalf("AcquirePermit(%s, %q, slot %d) won with token 0", s.id, sem, slot)
	case !r.Won && r.Token != 0:
		s.e.t.Fatalf("AcquirePermit(%s, %q, slot %d) lost with token %d, want 0", s.id, sem, slot, r.Token)
	case r.Won:
		s.held[name] = r.Token
		s.gen++
	}
	return r
}

// testPermitsAtMostN: n sessions take the n slots of a semaphore with
// tokens that increase in the order granted; another session wins none of
// them, and wins a slot once it is released, closed or expired, with a
// token above every earlier one. A slot is an ordinary lease to Acquire,
// KeepAlive and Release. Permits outside the limits are refused.
func testPermitsAtMostN(e *env) {
	const n = 4 // one more than the ways to free a slot below
	sem := e.name("s")
	holders := make([]*session, n)
	var last uint64
	for i := range holders {
		holders[i] = e.openLong(e.node())
		r := holders[i].permit(sem, n, i, nil)
		if !r.Won || r.Token <= last {
			e.t.Fatalf("slot %d of a free semaphore: %+v, want won with a token above %d", i, r, last)
		}
		last = r.Token
	}
	late := e.openLong(e.node())
	for i := range n {
		if r := late.permit(sem, n, i, nil); r.Won {
			e.t.Fatalf("slot %d won with token %d while its holder is live: %d permits let %d holders in", i, r.Token, n, n+1)
		}
		late.lose(simba.PermitName(sem, i), "the slot is held as a permit")
	}
	for i, h := range holders {
		h.wantLeases(h.keepAlive(), map[string]uint64{simba.PermitName(sem, i): h.held[simba.PermitName(sem, i)]}, "a holder keeps its slot")
	}
	late.wantLeases(late.keepAlive(), nil, "the late session owns no slot")

	// Each way a slot becomes free: a release, a close, an expiry.
	frees := []func(*session, string){
		func(s *session, name string) { s.release(name, s.held[name]) },
		func(s *session, _ string) { s.close() },
	}
	if e.h.Expire != nil {
		frees = append(frees, func(s *session, _ string) { e.h.Expire(e.t, s.id) })
	}
	for i, free := range frees {
		name := simba.PermitName(sem, i)
		free(holders[i], name)
		r := late.permit(sem, n, i, nil)
		if !r.Won || r.Token <= last {
			e.t.Fatalf("slot %d once freed: %+v, want won with a token above %d, the highest of the semaphore", i, r, last)
		}
		last = r.Token
		late.release(name, r.Token)
	}
	// The owner of a slot asking for it again starts a new term.
	own := holders[n-1]
	if r := own.permit(sem, n, n-1, nil); !r.Won || r.Token <= last {
		e.t.Fatalf("slot %d asked again by its owner: %+v, want won with a token above %d", n-1, r, last)
	}

	for _, bad := range []simba.Permit{
		{Semaphore: sem, Permits: 0}, {Semaphore: sem, Permits: -1}, {Semaphore: sem, Permits: simba.MaxPermits + 1},
		{Semaphore: sem, Permits: n, Slot: n}, {Semaphore: sem, Permits: n, Slot: -1},
		{Semaphore: "", Permits: 1}, {Semaphore: "bad/name", Permits: 1},
		{Semaphore: e.name(string(make([]byte, simba.MaxNameLength))), Permits: 1},
	} {
		ctx, cancel := e.ctx()
		r, err := e.permitter(late.b).AcquirePermit(ctx, late.id, bad)
		cancel()
		var ne *simba.NameError
		if r.Won || (!errors.Is(err, simba.ErrInvalidArgument) && !errors.As(err, &ne)) {
			e.t.Fatalf("AcquirePermit(%+v) = %+v, %v; want an error matching ErrInvalidArgument or a *NameError", bad, r, err)
		}
	}
}

// testPermitsMismatch: while a slot granted under n permits is held, a
// call with another number fails with ErrPermitsMismatch for every slot
// and takes nothing; once no slot is held, the new number is accepted, and
// its tokens stay above the old ones.
func testPermitsMismatch(e *env) {
	sem := e.name("s")
	a, b := e.openLong(e.node()), e.openLong(e.node())
	ta := a.permit(sem, 2, 1, nil).Token
	for slot := range 3 {
		b.permit(sem, 3, slot, simba.ErrPermitsMismatch)
	}
	a.permit(sem, 1, 0, simba.ErrPermitsMismatch) // the holder's own session too
	b.wantLeases(b.keepAlive(), nil, "a refused call takes nothing")
	a.release(simba.PermitName(sem, 1), ta)
	r := b.permit(sem, 3, 2, nil)
	if !r.Won || r.Token <= ta {
		e.t.Fatalf("3 permits once the 2-permit slot was released: %+v, want won with a token above %d", r, ta)
	}
	a.permit(sem, 2, 0, simba.ErrPermitsMismatch)
	b.close()
	if r := a.permit(sem, 2, 0, nil); !r.Won {
		e.t.Fatalf("2 permits once the 3-permit holder closed: %+v, want won", r)
	}
}

// testPermitsRace: sessions race for the slots of a semaphore; each slot
// has at most one winner and no token is handed out twice. Then two
// sessions with different numbers of permits race on a free semaphore,
// round after round: at most one of them wins.
func testPermitsRace(e *env) {
	const racers, n, rounds = 8, 3, 6
	ss := make([]*session, racers)
	for i := range ss {
		ss[i] = e.openLong(e.node())
	}
	for round := range rounds {
		sem := e.name("s" + string(rune('a'+round)))
		type win struct {
			racer int
			r     simba.AcquireResult
			err   error
		}
		wins := make([][]win, n)
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, s := range ss {
			permits := n
			if round%2 == 1 && i == 0 {
				permits = n + 1 // one racer with the wrong number
			}
			for slot := range n {
				s.touched[simba.PermitName(sem, slot)] = true
			}
			wg.Go(func() {
				<-start
				for k := range n {
					slot := (i + k) % n
					ctx, cancel := e.ctx()
					r, err := e.permitter(s.b).AcquirePermit(ctx, s.id, simba.Permit{Semaphore: sem, Permits: permits, Slot: slot})
					cancel()
					mu.Lock()
					wins[slot] = append(wins[slot], win{i, r, err})
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		tokens := map[uint64]int{}
		var wrong, right bool
		for slot, ws := range wins {
			owner := -1
			for _, w := range ws {
				switch {
				case w.err != nil && !errors.Is(w.err, simba.ErrPermitsMismatch):
					e.t.Fatalf("round %d: racer %d, slot %d: %v", round, w.racer, slot, w.err)
				case w.err != nil || !w.r.Won:
				case owner >= 0 && owner != w.racer:
					e.t.Fatalf("round %d: racers %d and %d both own slot %d", round, owner, w.racer, slot)
				default:
					if other, dup := tokens[w.r.Token]; dup {
						e.t.Fatalf("round %d: token %d handed out twice (racers %d and %d)", round, w.r.Token, other, w.racer)
					}
					tokens[w.r.Token] = w.racer
					owner = w.racer
					wrong = wrong || (round%2 == 1 && w.racer == 0)
					right = right || round%2 == 0 || w.racer != 0
				}
			}
		}
		if wrong && right {
			e.t.Fatalf("round %d: a racer with %d permits and one with %d both won slots", round, n+1, n)
		}
		// The racers' wins were not recorded as held: release them here.
		for slot, ws := range wins {
			for _, w := range ws {
				if w.err == nil && w.r.Won {
					ss[w.racer].release(simba.PermitName(sem, slot), w.r.Token)
				}
			}
		}
	}
}

// testPermitsGrantOrder: a session that waited for a slot (a backend may
// prepare its take when the slot is released) and wins it after another
// slot was granted gets a token above that grant's.
func testPermitsGrantOrder(e *env) {
	sem := e.name("s")
	a, b, c := e.openLong(e.node()), e.openLong(e.node()), e.openLong(e.node())
	ta := a.permit(sem, 2, 1, nil).Token
	if r := b.permit(sem, 2, 1, nil); r.Won {
		e.t.Fatalf("slot 1 won with token %d while its holder is live", r.Token)
	}
	// A backend that broadcasts releases may take the slot for the waiter
	// as soon as the release reaches it (Zookeeper's staged claims).
	var woken <-chan struct{}
	if rn, ok := b.b.(simba.ReleaseNotifier); ok {
		ctx, cancel := e.ctx()
		defer cancel()
		ch, err := rn.WatchRelease(ctx, simba.PermitName(sem, 1))
		switch {
		case errors.Is(err, simba.ErrNotSupported): // no broadcasts here
		case err != nil:
			e.t.Fatalf("WatchRelease: %v", err)
		default:
			woken = ch
		}
	}
	a.release(simba.PermitName(sem, 1), ta)
	if woken != nil {
		select {
		case <-woken:
		case <-time.After(max(5*time.Second, e.h.Lease)):
			e.t.Fatalf("the watch of slot 1 did not fire after its release")
		}
	}
	tc := c.permit(sem, 2, 0, nil).Token
	r := b.permit(sem, 2, 1, nil)
	if !r.Won || r.Token <= tc {
		e.t.Fatalf("the waiter's slot, granted after slot 0 got token %d: %+v, want won with a token above it", tc, r)
	}
}
