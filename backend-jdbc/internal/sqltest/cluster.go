package sqltest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// testConformance runs the backend conformance suite. Every simulated node
// opens its own connection pool through Open, on tables of a prefix unique
// to the test. The sweep checks hold the floor row or a lease row in a
// transaction of the test's own, see the calls wait for it on the server,
// and backdate lease rows instead of waiting for them to become idle.
func testConformance(t *testing.T, f *fixture) {
	backendtest.Run(t, backendtest.Harness{
		Lease: 2 * time.Second,
		New:   func(tb testing.TB) simba.Backend { return f.open(tb) },
		Hold: func(tb testing.TB, name string) func() {
			commit := f.holdFloor
			if name != "" {
				commit = func(tb testing.TB) func() error { return f.lockLease(tb, name) }
			}
			release := commit(tb)
			return func() { _ = release() }
		},
		Waiting: func(tb testing.TB) int { return int(f.lockWaits(tb)) },
		Age: func(tb testing.TB, name string, d time.Duration) {
			q := "UPDATE " + f.prefix + "lease SET acquired_at = " + f.h.Later(-int(d/time.Second)-1) + " WHERE name = ?"
			if err := f.admin.Exec(ctxT(tb), q, name); err != nil {
				tb.Fatalf("backdate %q: %v", name, err)
			}
		},
	})
}

// testEngineLocks drives the backend through the engine: two clients, on
// backends with their own connection pools, contend for one lock; the
// second gets it after the first releases, with a higher token, and gets
// it after the first client closes without releasing.
func testEngineLocks(t *testing.T, f *fixture) {
	cfg := simba.Config{LeaseDuration: 3 * time.Second}
	quiet := slog.New(slog.DiscardHandler)
	newClient := func() *simba.Client {
		c, err := simba.New(f.open(t), simba.WithConfig(cfg), simba.WithLogger(quiet))
		if err != nil {
			t.Fatalf("simba.New: %v", err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	a, b := newClient(), newClient()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ta, err := a.Lock("engine").Acquire(ctx)
	if err != nil {
		t.Fatalf("a: Acquire: %v", err)
	}
	if _, err := b.Lock("engine").TryAcquire(ctx); !errors.Is(err, simba.ErrLockHeld) {
		t.Fatalf("b: TryAcquire of a held lock: %v, want ErrLockHeld", err)
	}
	if err := ta.Release(ctx); err != nil {
		t.Fatalf("a: Release: %v", err)
	}
	tb, err := b.Lock("engine").Acquire(ctx)
	if err != nil {
		t.Fatalf("b: Acquire after the release: %v", err)
	}
	if tb.Token() <= ta.Token() {
		t.Fatalf("b's token %d, want more than a's %d", tb.Token(), ta.Token())
	}
	if !tb.Valid() {
		t.Fatal("b's fresh term is not valid")
	}

	// b closes its client without releasing: a takes over at once,
	// since closing the session frees its leases.
	if err := b.Close(ctx); err != nil {
		t.Fatalf("b: Close: %v", err)
	}
	if tb.Valid() {
		t.Fatal("b's term is still valid after its client closed")
	}
	ta2, err := a.Lock("engine").Acquire(ctx)
	if err != nil {
		t.Fatalf("a: Acquire after b closed: %v", err)
	}
	if ta2.Token() <= tb.Token() {
		t.Fatalf("a's new token %d, want more than b's %d", ta2.Token(), tb.Token())
	}
	ta2.Close()
}

// testRaceOneWinnerPerRound: 50 sessions, on 5 backends with their own
// connection pools, race for one name round after round. Each round must
// have exactly one winner with a token above the previous round's. The
// round ends alternately by a release, by the winner closing its session,
// and by the winner's session expiring (its expires_at moved into the past
// on the database clock, the state a lapsed keep-alive leaves), so every
// way a lease becomes free is raced for.
func testRaceOneWinnerPerRound(t *testing.T, f *fixture) {
	const sessions, nodes, rounds = 50, 5, 9
	backends := make([]Backend, nodes)
	for i := range backends {
		backends[i] = f.open(t)
	}
	type racer struct {
		b Backend
		s simba.SessionID
	}
	racers := make([]racer, sessions)
	const lease = time.Minute
	const name = "contended"
	var last uint64
	for round := range rounds {
		for i := range racers {
			b := backends[i%nodes]
			racers[i] = racer{b: b, s: open(t, b, lease)}
		}
		results := make([]simba.AcquireResult, sessions)
		errs := make([]error, sessions)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, r := range racers {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				<-start
				results[i], errs[i] = r.b.Acquire(ctx, r.s, name)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, res := range results {
			switch {
			case errs[i] != nil:
				t.Fatalf("round %d: racer %d: %v", round, i, errs[i])
			case res.Won && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both won (tokens %d, %d)", round, winner, i, results[winner].Token, res.Token)
			case res.Won:
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no winner among %d racers for a free lease", round, sessions)
		}
		tok := results[winner].Token
		if tok <= last {
			t.Fatalf("round %d: token %d, want more than %d", round, tok, last)
		}
		last = tok
		w := racers[winner]
		if got := keepAliveOrExpired(t, w.b, w.s, lease); got != tok {
			t.Fatalf("round %d: winner's keep-alive lists token %d, want %d", round, got, tok)
		}
		// Free the lease for the next round, and close the rest.
		switch round % 3 {
		case 0:
			if err := w.b.Release(ctxT(t), w.s, name, tok); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := w.b.CloseSession(ctxT(t), w.s); err != nil {
				t.Fatal(err)
			}
		case 2:
			f.expire(w.s)
		}
		for i, r := range racers {
			if i != winner || round%3 != 2 {
				if err := r.b.CloseSession(ctxT(t), r.s); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("%d rounds of %d sessions, last token %d", rounds, sessions, last)
}

// keepAliveOrExpired returns the token s holds for "contended" per its
// keep-alive.
func keepAliveOrExpired(t *testing.T, b Backend, s simba.SessionID, lease time.Duration) uint64 {
	t.Helper()
	r, err := b.KeepAlive(ctxT(t), s, unsure(lease, "contended"))
	if errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("the winner's session expired at once")
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.Owned["contended"]
}
