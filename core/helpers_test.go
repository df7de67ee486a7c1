package simba_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// testConfig is a 3s lease renewed every second, no drift or margin unless
// a test sets them, so deadlines are easy to compute.
func testConfig() simba.Config {
	return simba.Config{LeaseDuration: 3 * time.Second, RenewInterval: time.Second, NoDrift: true, NoMargin: true}
}

// newClient returns a client of b closed at the end of the test.
func newClient(t *testing.T, b simba.Backend, opts ...simba.Option) *simba.Client {
	t.Helper()
	opts = append([]simba.Option{simba.WithConfig(testConfig()), simba.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	c, err := simba.New(b, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// call is one listener callback as recorded.
type call struct {
	elected bool
	term    *simba.Term
	reason  simba.RevokeReason
	at      time.Time
}

// recorder is a Listener that records every callback.
type recorder struct {
	mu    sync.Mutex
	calls []call
	ch    chan call
}

func newRecorder() *recorder { return &recorder{ch: make(chan call, 1000)} }

func (r *recorder) OnElected(_ context.Context, t *simba.Term) { r.add(call{elected: true, term: t}) }

func (r *recorder) OnRevoked(_ context.Context, t *simba.Term, reason simba.RevokeReason) {
	r.add(call{term: t, reason: reason})
}

func (r *recorder) add(c call) {
	c.at = time.Now()
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	r.ch <- c
}

// next returns the next callback, failing the test when none comes within
// d of (fake) time.
func (r *recorder) next(t *testing.T, d time.Duration) call {
	t.Helper()
	select {
	case c := <-r.ch:
		return c
	case <-time.After(d):
		t.Fatalf("no callback within %v", d)
		return call{}
	}
}

func (r *recorder) elected(t *testing.T, d time.Duration) *simba.Term {
	t.Helper()
	c := r.next(t, d)
	if !c.elected {
		t.Fatalf("got OnRevoked(%v, %v), want OnElected", c.term, c.reason)
	}
	return c.term
}

func (r *recorder) revoked(t *testing.T, d time.Duration, want simba.RevokeReason) *simba.Term {
	t.Helper()
	c := r.next(t, d)
	if c.elected {
		t.Fatalf("got OnElected(%v), want OnRevoked(%v)", c.term, want)
	}
	if c.reason != want {
		t.Fatalf("OnRevoked(%v) reason %v, want %v", c.term, c.reason, want)
	}
	return c.term
}

// quiet fails the test if a callback arrives within d.
func (r *recorder) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case c := <-r.ch:
		t.Fatalf("unexpected callback elected=%v %v reason %v", c.elected, c.term, c.reason)
	case <-time.After(d):
	}
}

var _ = memory.New
