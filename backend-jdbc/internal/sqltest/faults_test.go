package sqltest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// testTakeOverWaitsForRenewalInFlight: the owner's keep-alive has renewed
// its session but not committed yet when the session's old expiry passes.
// A candidate's Acquire must wait for that renewal and lose, never take
// the lease over from a session that ends up renewed. A stale snapshot
// (PostgreSQL's statement snapshot, InnoDB's REPEATABLE READ read view)
// would show the old expiry and hand the lease to both.
func testTakeOverWaitsForRenewalInFlight(t *testing.T, f *fixture) {
	b := f.backend()
	const lease = 700 * time.Millisecond
	owner := open(t, b, lease)
	opened := time.Now()
	tok := acquire(t, b, owner, "n").Token
	cand := open(t, b, time.Minute)

	commit := f.hold(t, "renewal in a transaction", f.renewSQL(), string(owner))
	time.Sleep(time.Until(opened.Add(lease + 200*time.Millisecond)))

	done := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), cand, "n") })
	// The server shows the take-over waiting for the owner's session row
	// before the renewal is let go.
	if o := awaitWaitsOr(t, f, "the take-over waiting for the owner's renewal", 1, done); o != nil {
		t.Fatalf("Acquire returned %+v, %v while the owner's renewal was in flight: it did not wait for it", o.v, o.err)
	}
	if err := commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("Acquire: %v", res.err)
	}
	if res.v.Won {
		t.Fatalf("the lease was taken over (token %d) from a session whose renewal committed", res.v.Token)
	}
	if got := keepAlive(t, b, owner, lease, "n").Owned; got["n"] != tok {
		t.Fatalf("owner's leases = %v, want n:%d", got, tok)
	}
}

// wantRecovery retries op a few times: after a killed connection the
// client must reconnect by itself. Failures on the way must be this
// package's transient errors, never ErrSessionExpired.
func wantRecovery(t *testing.T, pkg, what string, op func() error) {
	t.Helper()
	var err error
	for range 5 {
		if err = op(); err == nil {
			return
		}
		if errors.Is(err, simba.ErrSessionExpired) || !strings.HasPrefix(err.Error(), pkg+": ") {
			t.Fatalf("%s after a killed connection: %v, want a transient %s error", what, err, pkg)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not recover after a killed connection: %v", what, err)
}

// testKilledConnection: the server kills the backend's only connection,
// once between calls and once during a call blocked on a row lock. The
// blocked call returns an error at once, and the backend recovers on a
// new connection with the session and its lease intact.
func testKilledConnection(t *testing.T, f *fixture) {
	b, connIDOf := f.h.SingleConn(t, f.raw, f.options())
	t.Cleanup(func() { _ = b.Close() })
	connID := func() int64 {
		t.Helper()
		id, err := connIDOf(ctxT(t))
		if err != nil {
			t.Fatalf("connection id: %v", err)
		}
		return id
	}
	kill := func(id int64) {
		t.Helper()
		if err := f.h.Kill(ctxT(t), f.admin, id); err != nil {
			t.Fatalf("kill connection %d: %v", id, err)
		}
	}
	const lease = 30 * time.Second
	s := open(t, b, lease)
	tok := acquire(t, b, s, "n").Token

	kill(connID())
	wantRecovery(t, f.h.Pkg.Name, "keep-alive", func() error {
		r, err := b.KeepAlive(ctxT(t), s, unsure(lease, "n"))
		if err == nil && r.Owned["n"] != tok {
			t.Fatalf("leases after reconnect = %v, want n:%d", r.Owned, tok)
		}
		return err
	})

	// Block a keep-alive behind a lock on its session row, then kill
	// its connection while it waits.
	id := connID()
	commit, err := f.admin.ExecInTx(ctxT(t), f.renewSQL(), string(s))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := b.KeepAlive(ctx, s, unsure(lease))
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	kill(id)
	select {
	case err := <-errc:
		if errors.Is(err, simba.ErrSessionExpired) {
			t.Fatalf("keep-alive on a killed connection: %v, want a transient error", err)
		}
		t.Logf("keep-alive on a killed connection: %v", err)
	case <-time.After(4 * time.Second):
		_ = commit() // only frees the held rows: the test fails either way
		t.Fatal("a keep-alive whose connection was killed did not return within 4s")
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	wantRecovery(t, f.h.Pkg.Name, "acquire", func() error {
		r, err := b.Acquire(ctxT(t), s, "n")
		if err == nil && (!r.Won || r.Token != tok+1) {
			t.Fatalf("acquire by the owner after reconnect = %+v, want token %d", r, tok+1)
		}
		return err
	})
}
