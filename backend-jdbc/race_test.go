package simbasql

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// TestRaceOneWinnerPerRound: 50 sessions, on 5 backends with their own
// connection pools, race for one name round after round. Each round must
// have exactly one winner with a token above the previous round's. The
// round ends alternately by a release, by the winner closing its session,
// and by the winner's session expiring (its expires_at moved into the past
// on the database clock, the state a lapsed keep-alive leaves), so every
// way a lease becomes free is raced for.
func TestRaceOneWinnerPerRound(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		const sessions, nodes, rounds = 50, 5, 9
		backends := make([]*Backend, nodes)
		for i := range backends {
			b, err := Open(ctxT(t), f.openURL(), Options{TablePrefix: f.prefix, Migrate: true})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { b.Close() })
			backends[i] = b
		}
		type racer struct {
			b *Backend
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
	})
}

// keepAliveOrExpired returns the token s holds for "contended" per its
// keep-alive.
func keepAliveOrExpired(t *testing.T, b *Backend, s simba.SessionID, lease time.Duration) uint64 {
	t.Helper()
	r, err := b.KeepAlive(ctxT(t), s, lease)
	if errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("the winner's session expired at once")
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.Leases["contended"]
}
