package sqltest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// sweptNames is how many idle names testSweepBoundsLeaseRows sweeps: the
// sweep takes 4 s on PostgreSQL and 17 s on MariaDB on the test servers.
const sweptNames = 1_000_000

// insertIdle writes a lease row for each name, free, with token
// tokenOf(i) and a term begun an hour ago, as many released terms would
// leave them.
func (f *fixture) insertIdle(t *testing.T, names []string, tokenOf func(i int) uint64) {
	t.Helper()
	const chunk = 5000
	for start := 0; start < len(names); start += chunk {
		var q strings.Builder
		q.WriteString("INSERT INTO " + f.prefix + "lease (name, session_id, token, acquired_at) VALUES ")
		for i := start; i < min(start+chunk, len(names)); i++ {
			if i > start {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "('%s', NULL, %d, %s)", names[i], tokenOf(i), f.h.Later(-3600))
		}
		if err := f.admin.Exec(ctxT(t), q.String()); err != nil {
			t.Fatalf("insert idle leases: %v", err)
		}
	}
}

// leaseRows counts the rows of the lease table.
func (f *fixture) leaseRows(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := f.admin.Scan(ctxT(t), "SELECT count(*) FROM "+f.prefix+"lease", nil, &n); err != nil {
		t.Fatalf("count lease rows: %v", err)
	}
	return n
}

// testSweepBoundsLeaseRows: after sweptNames names were taken once and
// given back, a sweep leaves the rows of the names held or used within
// idle, and a swept name starts again above every token it had.
func testSweepBoundsLeaseRows(t *testing.T, f *fixture) {
	b := f.backend()
	s := open(t, b, time.Hour) // outlives the inserts and the sweep on a loaded machine
	held := acquire(t, b, s, "held").Token
	recent := acquire(t, b, s, "recent").Token
	if err := b.Release(ctxT(t), s, "recent", recent); err != nil {
		t.Fatal(err)
	}
	names := make([]string, sweptNames)
	for i := range names {
		names[i] = fmt.Sprintf("invoice-%07d", i)
	}
	f.insertIdle(t, names, func(i int) uint64 { return uint64(1 + i%7) })
	before := f.leaseRows(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	// Idle for half an hour: the inserted rows began an hour ago, recent
	// within this test, however long the inserts took.
	n, err := b.Sweep(ctx, 30*time.Minute)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	after := f.leaseRows(t)
	t.Logf("%d names taken once: %d lease rows, %d after a sweep of %v (%d removed)", sweptNames, before, after, took.Round(time.Millisecond), n)
	if n != sweptNames || after != 2 {
		t.Fatalf("Sweep removed %d of %d rows, %d left; want the %d idle ones removed and 2 left (held, recent)", n, before, after, sweptNames)
	}
	if got := keepAlive(t, b, s, time.Hour, "held", "recent", names[6]).Owned; len(got) != 1 || got["held"] != held {
		t.Fatalf("keep-alive after the sweep lists %v, want held at %d", got, held)
	}
	if tok := acquire(t, b, s, names[6]).Token; tok <= 7 {
		t.Fatalf("a swept name taken again got token %d, want above 7, the highest swept", tok)
	}
	if tok := acquire(t, b, s, "recent").Token; tok != recent+1 {
		t.Fatalf("a name used within idle got token %d, want %d", tok, recent+1)
	}
}

// testSweepRacesAcquire: sweeps run while other sessions take the names
// being swept; every name's new token is above the one its row had,
// whether its acquire ran before, during or after the sweep deleted it.
func testSweepRacesAcquire(t *testing.T, f *fixture) {
	b, sweeper := f.backend(), f.backend()
	const rounds, perRound, workers = 6, 200, 8
	sessions := make([]simba.SessionID, workers)
	for i := range sessions {
		sessions[i] = open(t, b, time.Minute)
	}
	for r := range rounds {
		names := make([]string, perRound)
		for i := range names {
			names[i] = fmt.Sprintf("r%d-%04d", r, i)
		}
		// Above every token of earlier rounds, so a floor read before this
		// round's sweep committed would hand out a token too low.
		base := uint64(1_000_000 * (r + 1))
		f.insertIdle(t, names, func(i int) uint64 { return base + uint64(i) })
		var wg sync.WaitGroup
		errs := make(chan error, workers+1)
		wg.Go(func() {
			if _, err := sweeper.Sweep(ctxT(t), time.Second); err != nil {
				errs <- fmt.Errorf("sweep: %w", err)
			}
		})
		for w := range workers {
			wg.Go(func() {
				for i := w; i < perRound; i += workers {
					res, err := b.Acquire(ctxT(t), sessions[w], names[i])
					switch {
					case err != nil:
						errs <- fmt.Errorf("acquire %s: %w", names[i], err)
						return
					case !res.Won:
						errs <- fmt.Errorf("acquire %s: lost a free name", names[i])
						return
					case res.Token <= base+uint64(i):
						errs <- fmt.Errorf("round %d: %s got token %d, its row had %d", r, names[i], res.Token, base+uint64(i))
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
	}
}

// testSweepAfterSnapshot: an acquire that read the name and the floor,
// then waited for its session row (a keep-alive of the session in flight),
// while another session took the name, gave it back and a sweep removed
// the row, still gets a token above the one the removed row had.
func testSweepAfterSnapshot(t *testing.T, f *fixture) {
	b := f.backend()
	slow, other := open(t, b, time.Minute), open(t, b, time.Minute)
	commit, err := f.admin.ExecInTx(ctxT(t), f.renewSQL(), string(slow))
	if err != nil {
		t.Fatalf("renewal in a transaction: %v", err)
	}
	done := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), slow, "x") })
	if res := awaitWaitsOr(t, f, "the acquire waiting for its session row", 1, done); res != nil {
		// MySQL/MariaDB's acquire does not wait for its caller's session
		// row: it read the name and the floor after nothing.
		_ = commit()
		if res.err != nil || !res.v.Won {
			t.Fatalf("Acquire without waiting for its session row = %+v, %v; want a win of a free name", res.v, res.err)
		}
		t.Logf("the acquire did not wait for its session row: %+v", res.v)
		return
	}
	var last uint64
	for range 3 {
		r := acquire(t, b, other, "x")
		if !r.Won {
			_ = commit()
			t.Fatal("the other session lost a free name")
		}
		last = r.Token
		if err := b.Release(ctxT(t), other, "x", r.Token); err != nil {
			_ = commit()
			t.Fatal(err)
		}
	}
	f.backdate(t, "x") // idle for the shortest sweep
	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	// The sweep runs, or waits for the acquire if that holds what it read
	// of the floor: either is fine.
	early := awaitWaitsOr(t, f, "the sweep done or waiting behind the acquire", 2, swept)
	if err := commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	res := <-done
	if o := result(early, swept); o.err != nil || o.v < 1 {
		t.Fatalf("Sweep = %d, %v; want x's row removed", o.v, o.err)
	}
	if res.err != nil {
		t.Fatalf("Acquire: %v", res.err)
	}
	if res.v.Won && res.v.Token <= last {
		t.Fatalf("x got token %d after a term with token %d (R-TERM-2)", res.v.Token, last)
	}
}

// testSweepWaitsForRenewalInFlight: a sweep that finds an owner expired
// while the owner's keep-alive is committing its renewal waits for it and
// keeps the lease, as a take-over does (testTakeOverWaitsForRenewalInFlight):
// freeing it would let another session win a name whose renewed owner
// still holds a valid term.
func testSweepWaitsForRenewalInFlight(t *testing.T, f *fixture) {
	b := f.backend()
	owner := open(t, b, time.Minute)
	tok := acquire(t, b, owner, "kept").Token
	f.backdate(t, "kept") // the term is older than the shortest idle
	f.expire(owner)
	commit := f.hold(t, "renewal in a transaction", f.renewSQL(), string(owner))
	swept := goCall(func() (int, error) { return b.Sweep(ctxRace(t), sweepIdle) })
	if o := awaitWaitsOr(t, f, "the sweep waiting for the renewal", 1, swept); o != nil {
		t.Fatalf("Sweep returned (%d, %v) while the owner's renewal was in flight: it did not wait for it", o.v, o.err)
	}
	if err := commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if o := <-swept; o.err != nil {
		t.Fatalf("Sweep: %v", o.err)
	}
	if got := keepAlive(t, b, owner, time.Minute, "kept").Owned; got["kept"] != tok {
		t.Fatalf("the renewed owner's leases = %v, want kept:%d", got, tok)
	}
	other := open(t, b, time.Minute)
	if r := acquire(t, b, other, "kept"); r.Won {
		t.Fatalf("another session won the renewed owner's lease (token %d)", r.Token)
	}
}
