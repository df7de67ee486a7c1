package sqltest

import (
	"context"
	"errors"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The tests of this file hold a row that a call must lock, give the call a
// short deadline, on a client that does not cancel statements on the
// server (Harness.Uncancelled), and check that the server stops waiting by
// about that deadline: a statement the client gave up on goes on waiting,
// and holding what it locked, until a bound of its own ends it.

// boundCall is the deadline of the calls below: their server-side bound,
// three quarters of it, is 1.5s (1s on MariaDB, a step of its).
const boundCall = 2 * time.Second

// boundSlack is how long after a call's deadline its statements may still
// be seen waiting: the server's view of lock waits lags (MariaDB refreshes
// it only once nobody read it for 100ms), and a loaded machine answers
// late. A statement left to the server's own timeouts waits far longer
// (innodb_lock_wait_timeout, 50s by default; PostgreSQL, for ever).
const boundSlack = 5 * time.Second

// uncancelled returns the backend of Harness.Uncancelled on the fixture's
// prefix, closed when t ends, or skips t without one.
func (f *fixture) uncancelled(t testing.TB) simba.Backend {
	t.Helper()
	if f.h.Uncancelled == nil {
		t.Skip("the harness has no client that leaves statements running")
	}
	b := f.h.Uncancelled(t, f.raw, f.options())
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// wantNoWaitsBy fails unless the server shows no statement on the
// fixture's tables waiting for a row lock by deadline. It asks every
// 200ms, so as not to put off MariaDB's refresh of what it shows.
func (f *fixture) wantNoWaitsBy(t testing.TB, deadline time.Time, what string) {
	t.Helper()
	for {
		n := f.lockWaits(t)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d statements still wait for a row lock on the server %v after %s's deadline", n, boundSlack, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testSweepEndsAtItsBound: a sweep waits for a lease row that another
// transaction holds, holding the floor meanwhile, and its ctx ends first.
// It must fail by its deadline with an error matching
// context.DeadlineExceeded, having removed nothing, and the server must
// have stopped it too: a sweep left waiting on the server keeps the floor
// locked, so that every first acquire of a name waits behind it and
// loses. So no statement may still wait shortly after the deadline, and a
// name never used is then won at once, while the row is still held.
func testSweepEndsAtItsBound(t *testing.T, f *fixture) {
	b := f.uncancelled(t)
	s := open(t, b, time.Minute)
	const n, fresh = "held", "fresh"
	tok := acquire(t, b, s, n).Token
	if err := b.Release(ctxT(t), s, n, tok); err != nil {
		t.Fatal(err)
	}
	f.backdate(t, n)
	unlock := f.lockLease(t, n)

	sw, ok := b.(simba.Sweeper)
	if !ok {
		t.Fatal("the backend does not sweep")
	}
	ctx, cancel := context.WithTimeout(context.Background(), boundCall)
	defer cancel()
	start := time.Now()
	removed, err := sw.Sweep(ctx, sweepIdle)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || removed != 0 {
		t.Fatalf("Sweep behind a held row = %d, %v; want 0 and an error matching context.DeadlineExceeded", removed, err)
	}
	if took > boundCall+time.Second {
		t.Fatalf("Sweep behind a held row returned after %v, with a deadline of %v", took, boundCall)
	}
	t.Logf("Sweep behind a held row: %v after %v", err, took.Round(time.Millisecond))
	f.wantNoWaitsBy(t, start.Add(boundCall+boundSlack), "the sweep")

	actx, acancel := context.WithTimeout(context.Background(), boundCall)
	defer acancel()
	if r, err := b.Acquire(actx, s, fresh); err != nil || !r.Won {
		t.Fatalf("the first acquire of a name after the sweep gave up = %+v, %v; want a win (the floor is still locked?)", r, err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if r := acquire(t, b, s, n); !r.Won || r.Token <= tok {
		t.Fatalf("the next term of %q = %+v, want a win above %d", n, r, tok)
	}
}

// testGroupAndCloseEndAtTheirBound: a join, a leave and a close of a
// session wait for a row another transaction holds (a membership being
// inserted, the membership, the session row) and their ctx ends first:
// each fails by its deadline, and the server has stopped its statement
// shortly after.
func testGroupAndCloseEndAtTheirBound(t *testing.T, f *fixture) {
	b := f.uncancelled(t)
	member := "INSERT INTO " + f.prefix + "group_member (group_name, session_id, joined_at) VALUES (?, ?, " + f.h.Later(0) + ")"
	for _, tt := range []struct {
		name string
		hold func(t testing.TB, s simba.SessionID) func() error
		call func(ctx context.Context, s simba.SessionID) error
	}{
		{"join behind an insert of the membership", func(t testing.TB, s simba.SessionID) func() error {
			return f.hold(t, "insert the membership", member, "g-join", string(s))
		}, func(ctx context.Context, s simba.SessionID) error {
			_, err := b.JoinGroup(ctx, s, "g-join")
			return err
		}},
		{"leave behind a lock of the membership", func(t testing.TB, s simba.SessionID) func() error {
			if _, err := b.JoinGroup(ctxT(t), s, "g-leave"); err != nil {
				t.Fatal(err)
			}
			return f.hold(t, "lock the membership", "SELECT group_name FROM "+f.prefix+"group_member WHERE group_name = ? AND session_id = ? FOR UPDATE", "g-leave", string(s))
		}, func(ctx context.Context, s simba.SessionID) error { return b.LeaveGroup(ctx, s, "g-leave") }},
		{"close behind a lock of the session", func(t testing.TB, s simba.SessionID) func() error {
			return f.hold(t, "lock the session", "SELECT id FROM "+f.prefix+"session WHERE id = ? FOR UPDATE", string(s))
		}, func(ctx context.Context, s simba.SessionID) error { return b.CloseSession(ctx, s) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, b, time.Minute)
			unlock := tt.hold(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), boundCall)
			defer cancel()
			start := time.Now()
			err := tt.call(ctx, s)
			took := time.Since(start)
			if err == nil {
				t.Fatalf("the call behind a held row succeeded after %v", took)
			}
			if took > boundCall+time.Second {
				t.Fatalf("the call behind a held row returned after %v, with a deadline of %v", took, boundCall)
			}
			t.Logf("the call behind a held row: %v after %v", err, took.Round(time.Millisecond))
			f.wantNoWaitsBy(t, start.Add(boundCall+boundSlack), "the call")
			if err := unlock(); err != nil {
				t.Fatalf("commit: %v", err)
			}
		})
	}
}
