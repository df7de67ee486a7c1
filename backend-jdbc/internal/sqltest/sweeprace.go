package sqltest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The tests of this file force each order in which a sweep and a
// take-over, a release, a keep-alive or another sweep can wait for a lock
// the other holds: a transaction of the test's own holds a row, the calls
// are started, the server is asked until it shows them waiting for a lock,
// and only then is the row let go. Whatever order the server then runs
// them in, no name may have two valid holders and tokens must increase.

// sweepIdle is the idle of the sweeps below, the shortest there is.
const sweepIdle = time.Second

// outcome is what a call started by goCall returned.
type outcome[T any] struct {
	v   T
	err error
}

// goCall runs fn in a goroutine of its own; its outcome arrives on the
// channel returned.
func goCall[T any](fn func() (T, error)) <-chan outcome[T] {
	ch := make(chan outcome[T], 1)
	go func() {
		v, err := fn()
		ch <- outcome[T]{v, err}
	}()
	return ch
}

// awaitWaits waits until the server shows n statements on the fixture's
// tables waiting for a row lock.
func (f *fixture) awaitWaits(t testing.TB, what string, n int) {
	t.Helper()
	await(t, what, func() bool { return f.lockWaits(t) >= int64(n) })
}

// awaitWaitsOr is awaitWaits for a call that may also return without
// waiting on some backend: its outcome is then returned (and n-1 waits
// are enough), nil if it waits.
func awaitWaitsOr[T any](t testing.TB, f *fixture, what string, n int, ch <-chan outcome[T]) *outcome[T] {
	t.Helper()
	var got *outcome[T]
	await(t, what, func() bool {
		if got == nil {
			select {
			case o := <-ch:
				got = &o
			default:
			}
		}
		want := n
		if got != nil {
			want--
		}
		return f.lockWaits(t) >= int64(want)
	})
	return got
}

// result returns early if it is set, else what ch delivers.
func result[T any](early *outcome[T], ch <-chan outcome[T]) outcome[T] {
	if early != nil {
		return *early
	}
	return <-ch
}

// hold runs q in a transaction left open, its row locks held, until the
// returned commit (or the end of the test).
func (f *fixture) hold(t testing.TB, what, q string, args ...any) (commit func() error) {
	t.Helper()
	commit, err := f.admin.ExecInTx(ctxT(t), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { _ = commit() }) // a no-op once committed
	return commit
}

// holdFloor locks the floor row, as a sweep under way does.
func (f *fixture) holdFloor(t testing.TB) func() error {
	return f.hold(t, "lock the floor row", "SELECT token FROM "+f.prefix+"lease_floor WHERE id = 1 FOR UPDATE")
}

// shareLease locks name's lease row in share mode, as a take-over or a
// sweep reading its owner may: an exclusive lock (a delete, an update)
// waits for it, another share lock does not.
func (f *fixture) shareLease(t testing.TB, name string) func() error {
	mode := "FOR SHARE"
	if f.h.Quote == "`" { // MariaDB has no FOR SHARE; MySQL 8 has both
		mode = "LOCK IN SHARE MODE"
	}
	return f.hold(t, "share-lock the lease row", "SELECT name FROM "+f.prefix+"lease WHERE name = ? "+mode, name)
}

// backdate makes the term of name's row begin an hour ago, as if it had
// been idle that long.
func (f *fixture) backdate(t testing.TB, names ...string) {
	t.Helper()
	q := "UPDATE " + f.prefix + "lease SET acquired_at = " + f.h.Later(-3600) + " WHERE name IN (" +
		strings.TrimSuffix(strings.Repeat("?,", len(names)), ",") + ")"
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	if err := f.admin.Exec(ctxT(t), q, args...); err != nil {
		t.Fatalf("backdate %v: %v", names, err)
	}
}

// leaseRow reads name's row: its owner ("" when free) and token; ok is
// false without a row.
func (f *fixture) leaseRow(t testing.TB, name string) (owner string, token int64, ok bool) {
	t.Helper()
	var n int64
	q := "SELECT COUNT(*), COALESCE(MAX(session_id), ''), COALESCE(MAX(token), 0) FROM " + f.prefix + "lease WHERE name = ?"
	if err := f.admin.Scan(ctxT(t), q, []any{name}, &n, &owner, &token); err != nil {
		t.Fatalf("read the lease row of %q: %v", name, err)
	}
	return owner, token, n > 0
}

// floorToken reads the floor.
func (f *fixture) floorToken(t testing.TB) int64 {
	t.Helper()
	var n int64
	if err := f.scalar(ctxT(t), "SELECT token FROM "+f.prefix+"lease_floor WHERE id = 1", &n); err != nil {
		t.Fatalf("read the floor: %v", err)
	}
	return n
}

// wantHeld fails unless s holds name with token by its row, its
// keep-alive and the refusal of another live session, and unless, once
// s gave it back, the next term of name gets a larger token.
func (f *fixture) wantHeld(t testing.TB, b simba.Backend, s simba.SessionID, name string, token uint64, why string) {
	t.Helper()
	if owner, tok, ok := f.leaseRow(t, name); !ok || owner != string(s) || uint64(tok) != token {
		t.Fatalf("%s: the row of %q is (row %v, owner %q, token %d), want %s's at %d", why, name, ok, owner, tok, s, token)
	}
	if got := keepAlive(t, b, s, time.Minute).Leases; got[name] != token {
		t.Fatalf("%s: the keep-alive of the holder lists %v, want %s:%d", why, got, name, token)
	}
	other := open(t, b, time.Minute)
	if r := acquire(t, b, other, name); r.Won {
		t.Fatalf("%s: another session won %q with token %d while %s holds it with token %d", why, name, r.Token, s, token)
	}
	if err := b.Release(ctxT(t), s, name, token); err != nil {
		t.Fatalf("release: %v", err)
	}
	if r := acquire(t, b, other, name); !r.Won || r.Token <= token {
		t.Fatalf("%s: the next term of %q = %+v, want a win above %d", why, name, r, token)
	}
}

// testSweepRaceTakeOverAhead: a take-over of a free name and a sweep both
// wait for a row the take-over needs (the floor row, or the name's lease
// row) and the sweep, begun more than idle after the take-over, runs once
// the take-over won. The sweep must keep the won row: deleting it leaves
// the winner a valid term while the next acquire of the name wins too.
func testSweepRaceTakeOverAhead(t *testing.T, f *fixture) {
	for i, held := range []string{"floor", "lease"} {
		t.Run(held+" row held", func(t *testing.T) {
			b := f.backend()
			first, a := open(t, b, time.Minute), open(t, b, time.Minute)
			n := fmt.Sprintf("ahead-%d", i)
			prev := acquire(t, b, first, n).Token
			if err := b.Release(ctxT(t), first, n, prev); err != nil {
				t.Fatal(err)
			}
			f.backdate(t, n)
			commit := f.holdFloor
			if held == "lease" {
				commit = func(t testing.TB) func() error { return f.lockRow(t, "lease", "name", n) }
			}
			release := commit(t)

			began := time.Now()
			won := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxT(t), a, n) })
			early := awaitWaitsOr(t, f, "the take-over waiting for the "+held+" row", 1, won)
			if early != nil {
				t.Logf("the take-over did not wait for the %s row: %+v, %v", held, early.v, early.err)
			}
			// A take-over that stamps its term with the time its statement
			// began makes it look idle to a sweep begun idle later.
			time.Sleep(time.Until(began.Add(sweepIdle + 100*time.Millisecond)))
			swept := goCall(func() (int, error) { return b.Sweep(ctxT(t), sweepIdle) })
			waits := 2
			if early != nil {
				waits = 1
			}
			f.awaitWaits(t, "the sweep waiting", waits)
			if err := release(); err != nil {
				t.Fatalf("commit: %v", err)
			}
			res := result(early, won)
			if res.err != nil || !res.v.Won || res.v.Token <= prev {
				t.Fatalf("the take-over = %+v, %v; want a win above %d", res.v, res.err, prev)
			}
			if o := <-swept; o.err != nil {
				t.Fatalf("Sweep: %v", o.err)
			}
			f.wantHeld(t, b, a, n, res.v.Token, "after the sweep that waited")
		})
	}
}
