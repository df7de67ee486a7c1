package fencingtest

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// store is the shared state of the test resources below.
type store struct {
	mu    sync.Mutex
	token uint64
	value string
}

// flaws selects how a test resource breaks the fencing contract; the zero
// value is a correct resource.
type flaws struct {
	ignoreTokens  bool // accept every write
	rejectEqual   bool // accept only tokens above the highest
	zeroUnfenced  bool // accept token 0 whatever the highest
	floatTokens   bool // compare tokens as float64
	int32Tokens   bool // keep tokens in 32 bits
	racyCheck     bool // check, yield, then write
	tornPair      bool // write the token, yield, then the value
	valueOnReject bool // store the value even when the token is rejected
	writeErr      error
	stateErr      error
	writePanics   bool
	statePanics   bool
	closeErr      error
	durable       bool  // implement Durable
	reopenLoses   bool  // Reopen opens an empty store
	reopenErr     error // Reopen fails
}

// resource is a Resource over a store, broken as its flaws say.
type resource struct {
	s      *store
	f      flaws
	closed *closeCount
}

// closeCount counts Close calls over every handle of one test.
type closeCount struct {
	mu     sync.Mutex
	opened int
	closed int
}

func (c *closeCount) open() {
	c.mu.Lock()
	c.opened++
	c.mu.Unlock()
}

func (r *resource) accepts(token uint64) bool {
	h := r.s.token
	switch {
	case r.f.ignoreTokens:
		return true
	case r.f.zeroUnfenced && token == 0:
		return true
	case r.f.rejectEqual:
		return token > h
	case r.f.floatTokens:
		return float64(token) >= float64(h)
	case r.f.int32Tokens:
		return uint32(token) >= uint32(h)
	}
	return token >= h
}

func (r *resource) record(token uint64) {
	if r.f.int32Tokens {
		token = uint64(uint32(token))
	}
	if r.f.floatTokens {
		token = uint64(float64(token))
	}
	r.s.token = token
}

func (r *resource) Write(_ context.Context, token uint64, value string) (bool, error) {
	if r.f.writePanics {
		panic("write exploded")
	}
	if r.f.writeErr != nil {
		return false, r.f.writeErr
	}
	s := r.s
	switch {
	case r.f.racyCheck:
		s.mu.Lock()
		ok := r.accepts(token)
		s.mu.Unlock()
		if !ok {
			return false, nil
		}
		runtime.Gosched()
		s.mu.Lock()
		r.record(token)
		s.value = value
		s.mu.Unlock()
		return true, nil
	case r.f.tornPair:
		s.mu.Lock()
		ok := r.accepts(token)
		if ok {
			r.record(token)
		}
		s.mu.Unlock()
		if !ok {
			return false, nil
		}
		runtime.Gosched()
		s.mu.Lock()
		s.value = value
		s.mu.Unlock()
		return true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.f.valueOnReject {
		s.value = value
	}
	if !r.accepts(token) {
		return false, nil
	}
	r.record(token)
	s.value = value
	return true, nil
}

func (r *resource) State(context.Context) (uint64, string, error) {
	if r.f.statePanics {
		panic("state exploded")
	}
	if r.f.stateErr != nil {
		return 0, "", r.f.stateErr
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.s.token, r.s.value, nil
}

func (r *resource) Close() error {
	r.closed.mu.Lock()
	r.closed.closed++
	r.closed.mu.Unlock()
	return r.f.closeErr
}

// durableResource adds Reopen to resource.
type durableResource struct{ *resource }

func (r durableResource) Reopen(context.Context) (Resource, error) {
	if r.f.reopenErr != nil {
		return nil, r.f.reopenErr
	}
	s := r.s
	if r.f.reopenLoses {
		s = &store{}
	}
	r.closed.open()
	return durableResource{&resource{s: s, f: r.f, closed: r.closed}}, nil
}

// factory returns a Check factory for resources with flaws f, counting
// opens and closes in c.
func factory(f flaws, c *closeCount) func(context.Context) (Resource, error) {
	return func(context.Context) (Resource, error) {
		c.open()
		r := &resource{s: &store{}, f: f, closed: c}
		if f.durable {
			return durableResource{r}, nil
		}
		return r, nil
	}
}

var allChecks = []string{"FreshState", "HigherToken", "EqualToken", "LowerToken", "ZeroToken", "LargeTokens", "Atomic", "Durable"}

func TestCheckNamesEveryCheck(t *testing.T) {
	var names []string
	for _, c := range checks {
		names = append(names, c.name)
		if c.property == "" {
			t.Errorf("check %s names no property", c.name)
		}
	}
	if !slices.Equal(names, allChecks) {
		t.Errorf("checks = %v, want %v", names, allChecks)
	}
}

// propertyOf returns the property of the check named name.
func propertyOf(name string) string {
	for _, c := range checks {
		if c.name == name {
			return c.property
		}
	}
	return "no such check " + name
}

func TestCheck(t *testing.T) {
	errDisk := errors.New("disk full")
	errConn := errors.New("connection refused")
	all := allChecks
	noDurable := all[:len(all)-1]
	tests := []struct {
		name  string
		give  flaws
		want  []string // checks that must fail, and no other
		say   string   // text every failure message must contain
		plain bool     // failures come from the harness and name no property
	}{
		{name: "correct"},
		{name: "correct durable", give: flaws{durable: true}},
		{name: "ignores tokens", give: flaws{ignoreTokens: true}, want: []string{"LowerToken", "ZeroToken", "LargeTokens", "Atomic"}},
		{name: "rejects equal tokens", give: flaws{rejectEqual: true}, want: []string{"EqualToken"}},
		{name: "token 0 means unfenced", give: flaws{zeroUnfenced: true}, want: []string{"ZeroToken"}},
		{name: "float64 tokens", give: flaws{floatTokens: true}, want: []string{"LargeTokens"}},
		{name: "32-bit tokens", give: flaws{int32Tokens: true}, want: []string{"LargeTokens"}},
		{name: "check then write", give: flaws{racyCheck: true}, want: []string{"Atomic"}},
		{name: "token and value apart", give: flaws{tornPair: true}, want: []string{"Atomic"}},
		{name: "stale write changes the value", give: flaws{valueOnReject: true}, want: []string{"LowerToken", "ZeroToken", "LargeTokens", "Atomic"}},
		{name: "reopen loses the state", give: flaws{durable: true, reopenLoses: true}, want: []string{"Durable"}},
		{name: "reopen fails", give: flaws{durable: true, reopenErr: errConn}, want: []string{"Durable"}, say: "Reopen failed: connection refused"},
		{name: "write fails", give: flaws{writeErr: errDisk}, want: noDurable[1:], say: "failed: disk full"},
		{name: "state fails", give: flaws{stateErr: errDisk, durable: true}, want: all, say: "State() failed: disk full"},
		{name: "write panics", give: flaws{writePanics: true}, want: noDurable[1:], say: "panicked: write exploded"},
		{name: "state panics", give: flaws{statePanics: true}, want: noDurable, say: "State() panicked: state exploded"},
		{name: "close fails", give: flaws{closeErr: errConn}, want: noDurable, say: "Close failed: connection refused", plain: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var closes closeCount
			failures := Check(t.Context(), factory(tt.give, &closes))
			var got []string
			for _, f := range failures {
				got = append(got, f.Check)
				if !slices.Contains(tt.want, f.Check) {
					t.Errorf("unexpected failure: %v", f)
				}
				if p := propertyOf(f.Check); !tt.plain && !strings.HasPrefix(f.Message, p+": ") {
					t.Errorf("failure %v does not start with its property %q", f, p)
				}
				if !strings.Contains(f.Message, tt.say) {
					t.Errorf("failure %v does not say %q", f, tt.say)
				}
			}
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("check %s passed, want it to fail (failures: %v)", w, failures)
				}
			}
			if closes.opened == 0 || closes.closed != closes.opened {
				t.Errorf("resources opened %d, closed %d; want every one closed once", closes.opened, closes.closed)
			}
		})
	}
}

// TestCheckAtomicIsNotLuck repeats the Atomic check against the resources
// that break it: a kit that only caught them now and then would pass a
// broken resource by accident.
func TestCheckAtomicIsNotLuck(t *testing.T) {
	const rounds = 20
	atomic := checks[slices.Index(allChecks, "Atomic")]
	for _, give := range []flaws{{racyCheck: true}, {tornPair: true}, {ignoreTokens: true}, {valueOnReject: true}} {
		for range rounds {
			var closes closeCount
			if err := runCheck(t.Context(), atomic, factory(give, &closes)); err == nil {
				t.Fatalf("Atomic passed a resource with flaws %+v", give)
			}
		}
	}
}

// TestCheckCannotStart covers every way a check fails before it reaches
// the resource: each check must fail, saying why.
func TestCheckCannotStart(t *testing.T) {
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	var closes closeCount
	tests := []struct {
		name string
		ctx  context.Context
		give func(context.Context) (Resource, error)
		say  string
	}{
		{name: "no factory", ctx: t.Context(), give: nil, say: "no resource factory"},
		{name: "nil resource", ctx: t.Context(), give: func(context.Context) (Resource, error) { return nil, nil }, say: "the resource factory returned a nil Resource"},
		{name: "factory error", ctx: t.Context(), give: func(context.Context) (Resource, error) { return nil, errors.New("database down") }, say: "resource factory failed: database down"},
		{name: "canceled", ctx: canceled, give: factory(flaws{}, &closes), say: "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failures := Check(tt.ctx, tt.give)
			if len(failures) != len(allChecks) {
				t.Fatalf("got %d failures, want %d: %v", len(failures), len(allChecks), failures)
			}
			for _, f := range failures {
				if !strings.Contains(f.Message, tt.say) {
					t.Errorf("failure %v does not say %q", f, tt.say)
				}
			}
		})
	}
}

func TestFailureError(t *testing.T) {
	f := Failure{Check: "LowerToken", Message: propLower + ": boom"}
	if got, want := f.Error(), "LowerToken: "+propLower+": boom"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestRunCorrectResource(t *testing.T) {
	var closes closeCount
	open := factory(flaws{durable: true}, &closes)
	Run(t, func(t testing.TB) Resource {
		r, err := open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
	if closes.closed != closes.opened {
		t.Errorf("resources opened %d, closed %d", closes.opened, closes.closed)
	}
}

func TestLargeTokensStayInInt64(t *testing.T) {
	// Every Simba backend stores tokens as signed 64-bit integers; the kit
	// must not ask a resource to take a token no backend can issue.
	var closes closeCount
	var highest uint64
	open := factory(flaws{}, &closes)
	spy := func(ctx context.Context) (Resource, error) {
		r, err := open(ctx)
		return &tokenSpy{Resource: r, max: &highest}, err
	}
	if failures := Check(t.Context(), spy); len(failures) != 0 {
		t.Fatalf("correct resource failed: %v", failures)
	}
	if highest != math.MaxInt64 {
		t.Errorf("highest token written = %d, want math.MaxInt64", highest)
	}
}

// tokenSpy records the highest token written through it.
type tokenSpy struct {
	Resource
	mu  sync.Mutex
	max *uint64
}

func (s *tokenSpy) Write(ctx context.Context, token uint64, value string) (bool, error) {
	s.mu.Lock()
	*s.max = max(*s.max, token)
	s.mu.Unlock()
	return s.Resource.Write(ctx, token, value)
}
