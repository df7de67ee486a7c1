package capi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/cgo-bindings/internal/schematest"
	simba "github.com/simba-go/simba/core"
	_ "github.com/simba-go/simba/core/memory" // registers memory://
)

// store returns a memory:// URL of a store no other test uses.
var stores atomic.Int64

func storeURL() string { return fmt.Sprintf("memory://capi-%d", stores.Add(1)) }

// open opens a client on a fresh store and closes it when the test ends.
func open(t *testing.T, url string) uint64 {
	t.Helper()
	h, err := OpenClient(url, Options{LeaseMS: 3000})
	if err != nil {
		t.Fatalf("OpenClient(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = CloseClient(h, 5000, 0) })
	return h
}

// noHandles fails unless every handle was freed.
func noHandles(t *testing.T) {
	t.Helper()
	if c := HandleCounts(); c.Total() != 0 {
		t.Fatalf("live handles: %+v", c)
	}
}

func wantStatus(t *testing.T, what string, err error, want Status) {
	t.Helper()
	if got := StatusOf(err); got != want {
		t.Fatalf("%s: status %v (%v), want %v", what, got, err, want)
	}
}

func TestLockLifecycle(t *testing.T) {
	url := storeURL()
	a, b := open(t, url), open(t, url)
	term, err := Acquire(a, "job", 5000, 0, false)
	wantStatus(t, "acquire", err, OK)
	token, err := Token(term)
	wantStatus(t, "token", err, OK)
	if token == 0 {
		t.Fatal("token 0")
	}
	if v, _ := Valid(term); !v {
		t.Fatal("a fresh term is not valid")
	}
	if ms, _ := RemainingMS(term); ms <= 0 || ms > 3000 {
		t.Fatalf("remaining %dms, want in (0, 3000]", ms)
	}
	wantStatus(t, "ensure valid 100ms", EnsureValid(term, 100), OK)
	wantStatus(t, "ensure valid 1h", EnsureValid(term, 3600_000), TermExpired)

	_, err = Acquire(b, "job", 0, 0, true)
	wantStatus(t, "try-acquire of a held lock", err, LockHeld)
	_, err = Acquire(b, "job", 100, 0, false)
	wantStatus(t, "acquire of a held lock", err, LockTimeout)

	wantStatus(t, "release", Release(term, 5000), OK)
	wantStatus(t, "release again", Release(term, 5000), OK)
	if v, _ := Valid(term); v {
		t.Fatal("a released term is valid")
	}
	if r, _ := Reason(term); r != int32(simba.Stopped) {
		t.Fatalf("reason %d, want STOPPED", r)
	}
	wantStatus(t, "free", FreeTerm(term), OK)
	_, err = Token(term)
	wantStatus(t, "token of a freed term", err, BadHandle)

	next, err := Acquire(b, "job", 5000, 0, false)
	wantStatus(t, "acquire after release", err, OK)
	if tok, _ := Token(next); tok <= token {
		t.Fatalf("next token %d, want above %d", tok, token)
	}
	wantStatus(t, "close b", CloseClient(b, 5000, 0), OK)
	_, err = Token(next)
	wantStatus(t, "term of a closed client", err, BadHandle)
	wantStatus(t, "close a", CloseClient(a, 5000, 0), OK)
	noHandles(t)
}

func TestCancel(t *testing.T) {
	synctest.Test(t, testCancel)
}

func testCancel(t *testing.T) {
	url := storeURL()
	a, b := open(t, url), open(t, url)
	held, err := Acquire(a, "job", 5000, 0, false)
	wantStatus(t, "acquire", err, OK)
	c := NewCancel()
	done := make(chan error, 1)
	go func() {
		_, err := Acquire(b, "job", NoTimeout, c, false)
		done <- err
	}()
	synctest.Wait() // the acquisition waits: it cannot win while a holds the lock
	wantStatus(t, "cancel", Cancel(c), OK)
	wantStatus(t, "cancelled acquire", <-done, Cancelled)
	_, err = Acquire(b, "job", NoTimeout, c, false)
	wantStatus(t, "acquire with a cancelled handle", err, Cancelled)
	wantStatus(t, "free cancel", FreeCancel(c), OK)
	wantStatus(t, "free cancel again", FreeCancel(c), BadHandle)
	wantStatus(t, "free term", FreeTerm(held), OK)
	wantStatus(t, "close", CloseClient(a, 5000, 0), OK)
	wantStatus(t, "close", CloseClient(b, 5000, 0), OK)
	noHandles(t)
}

// recorder is a Listener that records the callbacks and can act from them.
type recorder struct {
	events   chan string
	onElect  func(election, term, cb uint64)
	revokeCB func(election, term, cb uint64)
}

func (r *recorder) Elected(election, term, token, cb uint64) {
	if _, err := Token(term); err != nil {
		r.events <- "elected with a bad term handle: " + err.Error()
		return
	}
	r.events <- fmt.Sprintf("elected %d", token)
	if r.onElect != nil {
		r.onElect(election, term, cb)
	}
}

func (r *recorder) Revoked(election, term, token uint64, reason int32, cb uint64) {
	r.events <- fmt.Sprintf("revoked %d %s", token, simba.RevokeReason(reason))
	if r.revokeCB != nil {
		r.revokeCB(election, term, cb)
	}
}

func (r *recorder) Released() { r.events <- "released" }

func next(t *testing.T, events chan string, want string) {
	t.Helper()
	select {
	case got := <-events:
		if got != want {
			t.Fatalf("callback %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no callback within 10s, want %q", want)
	}
}

func TestElection(t *testing.T) {
	c := open(t, storeURL())
	r := &recorder{events: make(chan string, 16)}
	el, err := StartElection(c, "leader", r)
	wantStatus(t, "start", err, OK)
	next(t, r.events, "elected 1")
	_, err = StartElection(c, "leader", r)
	wantStatus(t, "start again", err, AlreadyStarted)
	_, err = Acquire(c, "leader", 0, 0, true)
	wantStatus(t, "a lock of the election's name", err, NameInUse)

	wantStatus(t, "step down", StepDown(el, 0, 5000, 0), OK)
	next(t, r.events, "revoked 1 STEPPED_DOWN")
	next(t, r.events, "elected 2")
	wantStatus(t, "stop", StopElection(el, 5000, 0), OK)
	next(t, r.events, "revoked 2 STOPPED")
	next(t, r.events, "released")
	wantStatus(t, "stop again", StopElection(el, 5000, 0), BadHandle)
	wantStatus(t, "close", CloseClient(c, 5000, 0), OK)
	noHandles(t)
}

// TestStopFromCallback stops the election and then closes the client from
// its own callbacks: neither waits for the callback it is called from, and
// only the revoked callback of the term whose elected callback ran follows,
// then the release.
func TestStopFromCallback(t *testing.T) {
	c, err := OpenClient(storeURL(), Options{LeaseMS: 3000})
	wantStatus(t, "open", err, OK)
	errs := make(chan error, 2)
	r := &recorder{events: make(chan string, 16)}
	r.onElect = func(election, _, cb uint64) { errs <- StopElection(election, 5000, cb) }
	_, err = StartElection(c, "leader", r)
	wantStatus(t, "start", err, OK)
	next(t, r.events, "elected 1")
	wantStatus(t, "stop from on_elected", <-errs, OK)
	next(t, r.events, "revoked 1 STOPPED")
	next(t, r.events, "released")

	r2 := &recorder{events: make(chan string, 16)}
	r2.onElect = func(election, _, cb uint64) { errs <- StepDown(election, 0, 5000, cb) }
	r2.revokeCB = func(_, _, cb uint64) { errs <- CloseClient(c, 5000, cb) }
	_, err = StartElection(c, "leader", r2)
	wantStatus(t, "start again", err, OK)
	next(t, r2.events, "elected 2")
	wantStatus(t, "step down from on_elected", <-errs, OK)
	next(t, r2.events, "revoked 2 STEPPED_DOWN")
	wantStatus(t, "close from on_revoked", <-errs, OK)
	next(t, r2.events, "released")
	select {
	case e := <-r2.events:
		t.Errorf("a callback after the close returned: %s", e)
	case <-time.After(300 * time.Millisecond):
	}
	noHandles(t)
}

func TestSnapshot(t *testing.T) {
	c := open(t, storeURL())
	term, err := Acquire(c, "job", 5000, 0, false)
	wantStatus(t, "acquire", err, OK)
	b, err := Snapshot(c)
	wantStatus(t, "snapshot", err, OK)
	if err := schematest.Validate(b); err != nil {
		t.Error(err)
	}
	var s struct {
		Schema  string                  `json:"schema"`
		Session struct{ Status string } `json:"session"`
		Leases  []struct {
			Name, Kind, State string
			Token             uint64
			RemainingMs       int64
		} `json:"leases"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("snapshot %s: %v", b, err)
	}
	if s.Schema != simba.SnapshotSchema || s.Session.Status != "LIVE" || len(s.Leases) != 1 ||
		s.Leases[0].Name != "job" || s.Leases[0].State != "HOLDING" || s.Leases[0].Token == 0 ||
		s.Leases[0].RemainingMs <= 0 || s.Leases[0].RemainingMs > 3000 {
		t.Fatalf("snapshot %s", b)
	}
	wantStatus(t, "free", FreeTerm(term), OK)

	// One without leases fits too.
	c2 := open(t, storeURL())
	b, err = Snapshot(c2)
	wantStatus(t, "snapshot", err, OK)
	if err := schematest.Validate(b); err != nil {
		t.Error(err)
	}
}

// TestBadInputs: every bad argument is refused with its status, and no
// handle is left behind.
func TestBadInputs(t *testing.T) {
	c := open(t, storeURL())
	term, err := Acquire(c, "held", 5000, 0, false)
	wantStatus(t, "acquire", err, OK)
	cancel := NewCancel()
	defer func() { _ = FreeCancel(cancel) }()
	tests := []struct {
		give string
		call func() error
		want Status
	}{
		{"URL without scheme", func() error { _, err := OpenClient("localhost:6379", Options{}); return err }, InvalidURL},
		{"unknown scheme", func() error { _, err := OpenClient("etcd://x", Options{}); return err }, InvalidURL},
		{"URL not UTF-8", func() error { _, err := OpenClient("memory://\xff", Options{}); return err }, InvalidArgument},
		{"memory URL with a port", func() error { _, err := OpenClient("memory://a:1", Options{}); return err }, InvalidURL},
		{"negative lease", func() error { _, err := OpenClient("memory://", Options{LeaseMS: -1}); return err }, InvalidArgument},
		{"huge lease", func() error { _, err := OpenClient("memory://", Options{LeaseMS: 1 << 62}); return err }, InvalidArgument},
		{"renew too long", func() error { _, err := OpenClient("memory://", Options{LeaseMS: 1000, RenewMS: 900}); return err }, InvalidConfig},
		{"identity not UTF-8", func() error { _, err := OpenClient("memory://", Options{Identity: "\xc3"}); return err }, InvalidArgument},
		{"client 0", func() error { _, err := Acquire(0, "x", 0, 0, false); return err }, BadHandle},
		{"unknown client", func() error { _, err := Acquire(1<<60, "x", 0, 0, false); return err }, BadHandle},
		{"term as client", func() error { _, err := Acquire(term, "x", 0, 0, false); return err }, BadHandle},
		{"client as term", func() error { _, err := Token(c); return err }, BadHandle},
		{"cancel as election", func() error { return StopElection(cancel, 0, 0) }, BadHandle},
		{"empty name", func() error { _, err := Acquire(c, "", 0, 0, false); return err }, InvalidName},
		{"name with a slash", func() error { _, err := Acquire(c, "a/b", 0, 0, false); return err }, InvalidName},
		{"name not UTF-8", func() error { _, err := Acquire(c, "a\xff", 0, 0, false); return err }, InvalidName},
		{"name too long", func() error { _, err := Acquire(c, strings.Repeat("a", 129), 0, 0, false); return err }, InvalidName},
		{"name ..", func() error { _, err := StartElection(c, "..", &recorder{}); return err }, InvalidName},
		{"negative timeout", func() error { _, err := Acquire(c, "x", -2, 0, false); return err }, InvalidArgument},
		{"term as cancel", func() error { _, err := Acquire(c, "x", 0, term, false); return err }, BadHandle},
		{"nil listener", func() error { _, err := StartElection(c, "x", nil); return err }, InvalidArgument},
		{"negative cooldown", func() error { return StepDown(1<<60, -1, 0, 0) }, BadHandle},
		{"negative ensure", func() error { return EnsureValid(term, -1) }, InvalidArgument},
		{"negative release timeout", func() error { return Release(term, -5) }, InvalidArgument},
		{"snapshot of a term", func() error { _, err := Snapshot(term); return err }, BadHandle},
		{"close a term", func() error { return CloseClient(term, 0, 0) }, BadHandle},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			wantStatus(t, tt.give, tt.call(), tt.want)
		})
	}
	wantStatus(t, "free", FreeTerm(term), OK)
}

func TestElectionTermsAreNotReleasedByHand(t *testing.T) {
	c := open(t, storeURL())
	terms := make(chan uint64, 4)
	r := &recorder{events: make(chan string, 16), onElect: func(_, term, _ uint64) { terms <- term }}
	el, err := StartElection(c, "leader", r)
	wantStatus(t, "start", err, OK)
	next(t, r.events, "elected 1")
	term := <-terms
	wantStatus(t, "release of an election term", Release(term, 0), InvalidArgument)
	wantStatus(t, "free of an election term", FreeTerm(term), InvalidArgument)
	wantStatus(t, "negative cooldown", StepDown(el, -1, 0, 0), InvalidArgument)
	wantStatus(t, "stop", StopElection(el, 5000, 0), OK)
	next(t, r.events, "revoked 1 STOPPED")
	_, err = Token(term)
	wantStatus(t, "term after its revoked callback", err, BadHandle)
}

func TestStatusNames(t *testing.T) {
	for s := OK; s <= LastStatus; s++ {
		if !strings.HasPrefix(s.String(), "SIMBA_") || strings.HasPrefix(s.String(), "SIMBA_STATUS(") {
			t.Errorf("status %d has no name", s)
		}
	}
	if got := Status(99).String(); got != "SIMBA_STATUS(99)" {
		t.Errorf("unknown status: %s", got)
	}
	if err := Recovered("boom"); !errors.Is(err, ErrInternal) || StatusOf(err) != Internal {
		t.Errorf("Recovered: %v", err)
	}
}
