package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestOpenSilentServer opens a server that accepts connections and never
// answers: Open fails at its context's deadline, and without a deadline
// within go-redis's read timeout.
func TestOpenSilentServer(t *testing.T) {
	url := "redis://" + backendtest.SilentListener(t) + "/0"
	var err error
	within(t, time.Second, "Open of a silent server with a 300ms context", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err = Open(ctx, url, Options{})
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open of a silent server = %v, want context.DeadlineExceeded", err)
	}
	within(t, 2*time.Second, "Open of a silent server with read_timeout=500ms and no deadline", func() {
		_, err = Open(context.Background(), url+"?read_timeout=500ms", Options{})
	})
	if err == nil {
		t.Error("Open of a silent server succeeded")
	}
	t.Log(err)
}

// TestServerGoesSilent freezes the connections of an open Backend: calls
// fail within their context, and Close returns within a second while calls
// and the release subscription hang on the silent connections.
func TestServerGoesSilent(t *testing.T) {
	url := serverURL(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, opts.Addr)
	b := openBackend(t, fmt.Sprintf("redis://%s/%d", p.addr(), opts.DB), Options{})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, b, g.ID, "held")
	watch := watchSubscribed(ctx, t, b, "held")
	p.freeze()
	defer p.thaw() // for the cleanup, which deletes the keys through the proxy

	for op, call := range map[string]func(context.Context) error{
		"KeepAlive":    func(ctx context.Context) error { return second(b.KeepAlive(ctx, g.ID, renewal(5*time.Second))) },
		"Acquire":      func(ctx context.Context) error { return second(b.Acquire(ctx, g.ID, "other")) },
		"Release":      func(ctx context.Context) error { return b.Release(ctx, g.ID, "held", 1) },
		"JoinGroup":    func(ctx context.Context) error { return second(b.JoinGroup(ctx, g.ID, "g")) },
		"OpenSession":  func(ctx context.Context) error { return second(b.OpenSession(ctx, time.Second)) },
		"CloseSession": func(ctx context.Context) error { return b.CloseSession(ctx, g.ID) },
	} {
		var err error
		within(t, time.Second, op+" on a silent server with a 300ms context", func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err = call(ctx)
		})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, simba.ErrSessionExpired) {
			t.Errorf("%s on a silent server = %v, want a transient error matching context.DeadlineExceeded", op, err)
		}
	}

	// Calls under a long context are in flight when Close runs.
	var wg sync.WaitGroup
	defer wg.Wait()
	results := make(chan error, 2)
	wg.Go(func() { results <- second(b.KeepAlive(ctx, g.ID, renewal(5*time.Second))) })
	wg.Go(func() { results <- second(b.Acquire(ctx, g.ID, "other")) })
	time.Sleep(50 * time.Millisecond) // let them reach the wire
	within(t, time.Second, "Close with calls hanging on a silent server", func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	mustFire(t, watch, "Close")
	for range 2 {
		select {
		case err := <-results:
			if err == nil {
				t.Error("a call in flight on a silent server succeeded")
			}
		case <-time.After(time.Second):
			t.Fatal("a call in flight still hangs 1s after Close")
		}
	}
}

// TestSilenceNamesWhatTimedOut: Open's error tells a dial that got no
// connection (an unreachable host) from a server that took the connection
// and never answered.
func TestSilenceNamesWhatTimedOut(t *testing.T) {
	dial := fmt.Errorf("redis: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded})
	read := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	if got := silence(dial); !strings.Contains(got, "no connection was made") {
		t.Errorf("silence(a dial timeout) = %q, want it to say no connection was made", got)
	}
	if got := silence(read); !strings.Contains(got, "accepted connections but never answered") {
		t.Errorf("silence(a read timeout) = %q, want it to say the server never answered", got)
	}
}
