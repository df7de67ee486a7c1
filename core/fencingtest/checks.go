package fencingtest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// check is one property of the kit.
type check struct {
	name     string
	property string // leads every failure message of the check
	run      func(p *probe) error
}

// checks lists the kit's checks in the order they run; the package
// documentation describes each.
var checks = []check{
	{"FreshState", propFresh, checkFreshState},
	{"HigherToken", propHigher, checkHigherToken},
	{"EqualToken", propEqual, checkEqualToken},
	{"LowerToken", propLower, checkLowerToken},
	{"ZeroToken", propZero, checkZeroToken},
	{"LargeTokens", propLarge, checkLargeTokens},
	{"Atomic", propAtomic, checkAtomic},
	{"Durable", propDurable, checkDurable},
}

// The properties of the checks.
const (
	propFresh   = "a fresh resource must report token 0 and an empty value"
	propHigher  = "a higher token must be accepted"
	propEqual   = "an equal token must be accepted (a retry within one term)"
	propLower   = "a lower token must be rejected without changing the state"
	propZero    = "token 0 must never overwrite a fenced write"
	propLarge   = "tokens must be compared exactly up to math.MaxInt64"
	propAtomic  = "the token check and the write must be one atomic step"
	propDurable = "the highest token must survive a reopen"
)

// probe drives one resource through a sequence of writes and remembers the
// state a correct resource must be in.
type probe struct {
	ctx      context.Context
	h        *harness
	r        *guarded
	property string
	token    uint64 // highest token accepted so far
	value    string // value of the last accepted write
}

// start returns a probe on a fresh resource.
func start(ctx context.Context, h *harness, property string) (*probe, error) {
	r, err := h.fresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", property, err)
	}
	return &probe{ctx: ctx, h: h, r: r, property: property}, nil
}

func (p *probe) failf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", p.property, fmt.Sprintf(format, args...))
}

func (p *probe) failed(err error) error { return fmt.Errorf("%s: %w", p.property, err) }

// accept writes and requires the write to be accepted.
func (p *probe) accept(token uint64, value string) error {
	ok, err := p.r.write(p.ctx, token, value)
	if err != nil {
		return p.failed(err)
	}
	if !ok {
		return p.failf("Write(token %d, %q) was rejected, but the highest accepted token was %d", token, value, p.token)
	}
	p.token, p.value = token, value
	return nil
}

// reject writes and requires the write to be rejected with no change.
func (p *probe) reject(token uint64, value string) error {
	ok, err := p.r.write(p.ctx, token, value)
	if err != nil {
		return p.failed(err)
	}
	if ok {
		return p.failf("Write(token %d, %q) was accepted, but the highest accepted token was %d", token, value, p.token)
	}
	return p.expect("after a rejected write")
}

// expect requires State to report the state a correct resource is in.
func (p *probe) expect(when string) error {
	token, value, err := p.r.state(p.ctx)
	if err != nil {
		return p.failed(err)
	}
	if token != p.token || value != p.value {
		return p.failf("%s, State() = (token %d, %q), want (token %d, %q)", when, token, value, p.token, p.value)
	}
	return nil
}

// steps runs fs in order and returns the first error.
func steps(fs ...func() error) error {
	for _, f := range fs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func checkFreshState(p *probe) error {
	return p.expect("before any write")
}

func checkHigherToken(p *probe) error {
	return steps(
		func() error { return p.accept(1, "first") },
		func() error { return p.expect("after Write(token 1)") },
		func() error { return p.accept(2, "second") },
		func() error { return p.expect("after Write(token 2)") },
		func() error { return p.accept(1_000_003, "after a gap") },
		func() error { return p.expect("after Write(token 1000003)") },
	)
}

func checkEqualToken(p *probe) error {
	return steps(
		func() error { return p.accept(5, "batch-1") },
		func() error { return p.accept(5, "batch-1") },
		func() error { return p.expect("after the same write twice with token 5") },
		func() error { return p.accept(5, "batch-2") },
		func() error { return p.expect("after a second value with token 5") },
	)
}

func checkLowerToken(p *probe) error {
	return steps(
		func() error { return p.accept(7, "owner-7") },
		func() error { return p.reject(6, "stale-6") },
		func() error { return p.reject(1, "stale-1") },
		func() error { return p.accept(8, "owner-8") },
		func() error { return p.reject(7, "owner-7-again") },
	)
}

func checkZeroToken(p *probe) error {
	// On a fresh resource token 0 may be taken or refused, but the state
	// must agree with the answer.
	ok, err := p.r.write(p.ctx, 0, "unfenced")
	if err != nil {
		return p.failed(err)
	}
	if ok {
		p.value = "unfenced"
	}
	return steps(
		func() error {
			return p.expect(fmt.Sprintf("after Write(token 0) on a fresh resource returned accepted=%t", ok))
		},
		func() error { return p.accept(1, "term-1") },
		func() error { return p.reject(0, "unfenced") },
	)
}

func checkLargeTokens(p *probe) error {
	const (
		beyondInt32  = math.MaxUint32 + 2 // wraps to 1 in 32 bits
		beyondDouble = 1<<53 + 1          // rounds to 1<<53 in a float64
	)
	return steps(
		func() error { return p.accept(100, "small") },
		func() error { return p.accept(beyondInt32, "beyond int32") },
		func() error { return p.reject(100, "stale small") },
		func() error { return p.accept(beyondDouble, "beyond float64") },
		func() error { return p.reject(beyondDouble-1, "stale by one") },
		func() error { return p.accept(math.MaxInt64-1, "near the top") },
		func() error { return p.reject(math.MaxInt64-2, "stale near the top") },
		func() error { return p.accept(math.MaxInt64, "top") },
		func() error { return p.expect("after Write(token math.MaxInt64)") },
	)
}

// Shape of the Atomic check: rounds rounds of writers concurrent writes.
const (
	writers = 16
	rounds  = 50
)

// atomicValue is the value the Atomic check writes with token, so that any
// state read tells which write it came from.
func atomicValue(token uint64) string { return fmt.Sprintf("w%d", token) }

// checkAtomic races writers goroutines, each writing one token and then
// reading the state, in rounds. Round r writes the tokens r*writers+1 to
// (r+1)*writers, handed out scrambled (7 is coprime with 16) so that
// goroutines started in order do not write their tokens in order either.
// After every round the state must be the round's highest token: a stale
// write that passed its check before a newer write landed, and landed
// after it, shows there.
//
// Within a round, floor is the highest token that a completed call proved
// accepted: an accepted write, or a state read. A call that starts later
// must see at least that token, so every read is checked against the floor
// loaded before it started, and a write of a lower token must be rejected.
func checkAtomic(p *probe) error {
	var floor atomic.Uint64
	errs := make([]error, writers)
	for round := range rounds {
		if err := p.ctx.Err(); err != nil {
			return p.failed(err)
		}
		var wg sync.WaitGroup
		for g := range writers {
			token := uint64(round*writers + g*7%writers + 1)
			wg.Go(func() { errs[g] = atomicWrite(p.ctx, p.r, token, &floor) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return p.failed(err)
			}
		}
		top := uint64((round + 1) * writers)
		p.token, p.value = top, atomicValue(top)
		if err := p.expect(fmt.Sprintf("after round %d of %d concurrent writes", round+1, writers)); err != nil {
			return err
		}
	}
	return nil
}

// atomicWrite writes token, reads the state, and checks what a correct
// resource guarantees at that point whatever the other writers do.
func atomicWrite(ctx context.Context, r *guarded, token uint64, floor *atomic.Uint64) error {
	before := floor.Load()
	ok, err := r.write(ctx, token, atomicValue(token))
	if err != nil {
		return err
	}
	if ok {
		raise(floor, token)
	}
	if ok && token < before {
		return fmt.Errorf("Write(token %d) was accepted, but token %d had been accepted before it started", token, before)
	}
	before = floor.Load()
	got, value, err := r.state(ctx)
	if err != nil {
		return err
	}
	raise(floor, got)
	switch {
	case got == 0 || value != atomicValue(got):
		return fmt.Errorf("State() = (token %d, %q) while writes were racing: the value does not belong to that token", got, value)
	case got < before:
		return fmt.Errorf("State() reported token %d, but token %d had been accepted before the read started: a stale write overwrote it", got, before)
	case !ok && got <= token:
		return fmt.Errorf("Write(token %d) was rejected, then State() reported token %d: nothing higher had been accepted", token, got)
	}
	return nil
}

// raise sets floor to token if token is higher.
func raise(floor *atomic.Uint64, token uint64) {
	for {
		cur := floor.Load()
		if token <= cur || floor.CompareAndSwap(cur, token) {
			return
		}
	}
}

func checkDurable(p *probe) error {
	d, ok := p.r.r.(Durable)
	if !ok {
		return errNotDurable
	}
	reopen := func() error {
		r, err := p.h.reopen(p.ctx, d)
		if err != nil {
			return p.failed(err)
		}
		p.r = r
		return nil
	}
	return steps(
		func() error { return p.accept(5, "before reopen") },
		reopen,
		func() error { return p.expect("after Reopen") },
		func() error { return p.reject(4, "stale after reopen") },
		func() error { return p.accept(5, "retry after reopen") },
		func() error { return p.accept(6, "newer after reopen") },
		reopen,
		func() error { return p.expect("after a second Reopen") },
		func() error { return p.reject(5, "stale after the second reopen") },
	)
}
