package sqltest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// lockRow locks the row of the fixture's table whose column col is val, in
// a transaction of its own, as a take-over or any other transaction holding
// it would. The returned commit ends it; so does the end of the test.
func (f *fixture) lockRow(t testing.TB, table, col, val string) (commit func() error) {
	t.Helper()
	q := "SELECT " + col + " FROM " + f.prefix + table + " WHERE " + col + " = ? FOR UPDATE"
	commit, err := f.admin.ExecInTx(ctxT(t), q, val)
	if err != nil {
		t.Fatalf("lock the %s row: %v", table, err)
	}
	t.Cleanup(func() { _ = commit() }) // a no-op once committed
	return commit
}

// lockWaits counts the statements on the fixture's tables that wait for a
// row lock.
func (f *fixture) lockWaits(t testing.TB) int64 {
	t.Helper()
	var n int64
	if err := f.scalar(ctxT(t), f.h.LockWaits, &n, "%"+f.prefix+"%"); err != nil {
		t.Fatalf("count lock waits: %v", err)
	}
	return n
}

// expired reports whether the database clock is past the expiry of
// session s (or s no longer exists).
func (f *fixture) expired(t testing.TB, s simba.SessionID) bool {
	t.Helper()
	q := "SELECT COUNT(*) FROM " + f.prefix + "session WHERE id = ? AND expires_at > " + f.h.Later(0)
	var n int64
	if err := f.scalar(ctxT(t), q, &n, string(s)); err != nil {
		t.Fatalf("read the session's expiry: %v", err)
	}
	return n == 0
}

// await calls cond until it returns true, for at most 10 seconds. It asks
// every 150ms: InnoDB refreshes what information_schema.innodb_trx shows
// only when it was not read for 100ms.
func await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// testKeepAliveAfterLockWait (R-SES-3): a
// keep-alive that waits for a lock on its session row until after the
// session expired must find it expired. Compared with a time read before
// the wait, the session still looks live and would be renewed.
func testKeepAliveAfterLockWait(t *testing.T, f *fixture) {
	b := f.backend()
	const lease = 500 * time.Millisecond
	s := open(t, b, lease)

	commit := f.lockRow(t, "session", "id", string(s))
	done := goCall(func() (simba.KeepAliveReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		return b.KeepAlive(ctx, s, unsure(time.Minute))
	})
	await(t, "keep-alive waiting for the row lock", func() bool { return f.lockWaits(t) > 0 })
	await(t, "expiry of the session", func() bool { return f.expired(t, s) })
	if err := commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	res := <-done
	if !errors.Is(res.err, simba.ErrSessionExpired) {
		t.Fatalf("KeepAlive after waiting past the expiry = %+v, %v; want simba.ErrSessionExpired", res.v, res.err)
	}
	if _, err := b.KeepAlive(ctxT(t), s, unsure(time.Minute)); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("a second keep-alive: %v, want simba.ErrSessionExpired (the session stays expired)", err)
	}
	if _, err := b.Acquire(ctxT(t), s, "n"); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("acquire by the expired session: %v, want simba.ErrSessionExpired", err)
	}
}

// testAcquireAfterLockWait (R-SES-3): an acquire that
// waits for a lock until after its caller's session expired must not win,
// whether it waited for the lease row (a name used before) or for the
// caller's session row. An acquire that does not wait for the session row
// decides before the expiry; a win is then correct.
func testAcquireAfterLockWait(t *testing.T, f *fixture) {
	tests := []struct {
		name   string
		locked string // "lease" or "session"
		used   bool   // the name was acquired and released before
	}{
		{name: "lease row locked", locked: "lease", used: true},
		{name: "session row locked, name used before", locked: "session", used: true},
		{name: "session row locked, new name", locked: "session"},
	}
	b := f.backend()
	other := open(t, b, time.Minute)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("n%d", i)
			var last uint64
			if tt.used {
				last = acquire(t, b, other, name).Token
				if err := b.Release(ctxT(t), other, name, last); err != nil {
					t.Fatal(err)
				}
			}
			const lease = 500 * time.Millisecond
			s := open(t, b, lease)
			var commit func() error
			if tt.locked == "lease" {
				commit = f.lockRow(t, "lease", "name", name)
			} else {
				commit = f.lockRow(t, "session", "id", string(s))
			}
			done := goCall(func() (simba.AcquireResult, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				return b.Acquire(ctx, s, name)
			})
			var res *outcome[simba.AcquireResult]
			await(t, "acquire waiting for the row lock", func() bool {
				select {
				case r := <-done:
					res = &r
					return true
				default:
					return f.lockWaits(t) > 0
				}
			})
			if res != nil {
				if tt.locked == "lease" || res.err != nil || f.expired(t, s) {
					t.Fatalf("Acquire returned %+v, %v without waiting for the locked %s row", res.v, res.err, tt.locked)
				}
				t.Logf("Acquire decided without waiting for the session row, before the expiry: %+v", res.v)
				return
			}
			await(t, "expiry of the session", func() bool { return f.expired(t, s) })
			select {
			case r := <-done:
				// Answered while the row is still locked: the lock wait
				// seen was another statement's (or a view of it
				// information_schema had not refreshed yet).
				if tt.locked == "lease" || r.err != nil {
					t.Fatalf("Acquire returned %+v, %v while the locked %s row was held", r.v, r.err, tt.locked)
				}
				t.Logf("Acquire decided without waiting for the session row: %+v", r.v)
				return
			default:
			}
			if err := commit(); err != nil {
				t.Fatalf("commit: %v", err)
			}
			r := <-done
			if r.v.Won || (r.err != nil && !errors.Is(r.err, simba.ErrSessionExpired)) {
				t.Fatalf("Acquire after waiting past the caller's expiry = %+v, %v; want no win (simba.ErrSessionExpired, or lost)", r.v, r.err)
			}
			if _, err := b.Acquire(ctxT(t), s, name); !errors.Is(err, simba.ErrSessionExpired) {
				t.Fatalf("a second acquire: %v, want simba.ErrSessionExpired", err)
			}
			if r := acquire(t, b, other, name); !r.Won || r.Token <= last {
				t.Fatalf("acquire by a live session = %+v, want a win with a token above %d", r, last)
			}
		})
	}
}

// testContendedRowKeepsSession: a transaction holds a lease row for three
// lease durations while a node keeps trying to take that name, its calls
// giving up at a short deadline, or at a lease duration as the engine's
// lock attempts do, longer than a keep-alive's. The node's keep-alives must go on
// renewing its session as the engine's would, and its other term stay, the whole time: an acquire must
// never hold, while it waits, a lock that the keep-alive of its caller
// needs, and the server must stop waiting by the call's deadline, not
// whenever its own lock wait timeout ends it.
func testContendedRowKeepsSession(t *testing.T, f *fixture) {
	b := f.backend()
	const (
		lease    = time.Second
		renewing = lease / 3 // a keep-alive's deadline and period, as the engine's
	)
	other := open(t, b, time.Minute)
	if tok := acquire(t, b, other, "stuck").Token; b.Release(ctxT(t), other, "stuck", tok) != nil {
		t.Fatal("release of stuck")
	}
	s := open(t, b, lease)
	kept := acquire(t, b, s, "kept").Token
	commit := f.lockRow(t, "lease", "name", "stuck")

	stop := make(chan struct{})
	attempts := make(chan error, 1)
	go func() {
		n, longest := 0, time.Duration(0)
		defer func() { t.Logf("%d acquires of the locked name, the longest %v", n, longest) }()
		for {
			select {
			case <-stop:
				attempts <- nil
				return
			default:
			}
			attempt := 200 * time.Millisecond // the deadlines alternate
			if n%2 == 1 {
				attempt = lease
			}
			ctx, cancel := context.WithTimeout(context.Background(), attempt)
			start := time.Now()
			r, err := b.Acquire(ctx, s, "stuck")
			took := time.Since(start)
			cancel()
			n, longest = n+1, max(longest, took)
			switch {
			case r.Won:
				attempts <- fmt.Errorf("acquire of a row another transaction holds won token %d", r.Token)
				return
			case errors.Is(err, simba.ErrSessionExpired):
				attempts <- fmt.Errorf("acquire %d: %w", n, err)
				return
			case took > attempt+attempt/2:
				attempts <- fmt.Errorf("acquire %d took %v, with a deadline of %v", n, took, attempt)
				return
			}
		}
	}()
	stopAttempts := func() error {
		close(stop)
		return <-attempts
	}
	// The keep-alives run as the engine's do: each with the renew period
	// as its deadline (or the session's local deadline if sooner), one
	// that failed is tried again at once, and the session is lost once a
	// lease passed since the last renewal was sent. A keep-alive that
	// waited behind an acquire for the server's lock wait timeout loses
	// it; one late on a loaded machine, retried in time, does not, as it
	// does not in the engine. Each failure is logged with its time.
	locked := time.Now()
	end := locked.Add(3 * lease)
	renewed, failed := locked, 0
	for i := 1; time.Now().Before(end); i++ {
		start := time.Now()
		if start.After(renewed.Add(lease)) {
			t.Fatalf("keep-alive %d, %v after the row was locked: no renewal for %v, more than the lease: the session is lost (%d keep-alives failed; acquires: %v)",
				i, start.Sub(locked).Round(time.Millisecond), start.Sub(renewed).Round(time.Millisecond), failed, stopAttempts())
		}
		callEnd := start.Add(renewing)
		if last := renewed.Add(lease); last.Before(callEnd) {
			callEnd = last
		}
		ctx, cancel := context.WithDeadline(context.Background(), callEnd)
		r, err := b.KeepAlive(ctx, s, unsure(lease, "kept"))
		cancel()
		if errors.Is(err, simba.ErrSessionExpired) {
			t.Fatalf("keep-alive %d, %v after the row was locked: %v (acquires: %v)", i, start.Sub(locked).Round(time.Millisecond), err, stopAttempts())
		}
		if err != nil {
			failed++
			t.Logf("keep-alive %d, %v after the row was locked, failed after %v: %v", i, start.Sub(locked).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), err)
			continue
		}
		renewed = start
		if r.Owned["kept"] != kept {
			t.Fatalf("keep-alive %d lists %v, want kept:%d (acquires: %v)", i, r.Owned, kept, stopAttempts())
		}
		time.Sleep(renewing / 2)
	}
	if err := stopAttempts(); err != nil {
		t.Fatal(err)
	}
	// The row is still held: no statement of the calls given up may still
	// be waiting for it.
	deadline := time.Now().Add(time.Second)
	for n := f.lockWaits(t); n > 0; n = f.lockWaits(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%d statements still wait for the locked row a second after the last acquire gave up", n)
		}
		time.Sleep(150 * time.Millisecond)
	}
	if err := commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got := keepAlive(t, b, s, lease, "kept").Owned; got["kept"] != kept {
		t.Fatalf("keep-alive after the row was let go lists %v, want kept:%d", got, kept)
	}
}

// testTakeOverStampsTermAfterWait: a take-over of a free name waits for
// its lease row, which another transaction holds for more than a second.
// The term it wins begins once it has the row: Holder's Since must not
// lie before the row was let go. Stamped with the statement's start, it
// lies the whole wait earlier, and a sweep begun within its idle of the
// win may take the term for idle.
func testTakeOverStampsTermAfterWait(t *testing.T, f *fixture) {
	b := f.raceBackend(t)
	first, taker := open(t, b, time.Minute), open(t, b, time.Minute)
	const n = "stamped"
	prev := acquire(t, b, first, n).Token
	if err := b.Release(ctxT(t), first, n, prev); err != nil {
		t.Fatal(err)
	}
	unlock := f.lockLease(t, n)
	began := time.Now()
	won := goCall(func() (simba.AcquireResult, error) { return b.Acquire(ctxRace(t), taker, n) })
	if o := awaitWaitsOr(t, f, "the take-over waiting for the lease row", 1, won); o != nil {
		t.Fatalf("the take-over returned %+v, %v while its row was held", o.v, o.err)
	}
	time.Sleep(time.Until(began.Add(time.Second)))
	letGo := time.Now()
	if err := unlock(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	r := <-won
	if r.err != nil || !r.v.Won || r.v.Token <= prev {
		t.Fatalf("the take-over = %+v, %v; want a win above %d", r.v, r.err, prev)
	}
	hr, is := b.(simba.HolderReader)
	if !is {
		t.Fatal("the backend reads no holder")
	}
	h, ok, err := hr.Holder(ctxT(t), n)
	if err != nil || !ok || h.Session != taker {
		t.Fatalf("Holder(%q) = %+v, %v, %v; want %s", n, h, ok, err, taker)
	}
	// The server's clock is the machine's; 50ms allow for the rounding of
	// the stored time and a commit seen a little before letGo was read.
	if h.Since.Before(letGo.Add(-50 * time.Millisecond)) {
		t.Fatalf("the term won after a wait of %v begins at %v, %v before the row was let go (the take-over began %v before)",
			letGo.Sub(began).Round(time.Millisecond), h.Since.Format(time.RFC3339Nano), letGo.Sub(h.Since).Round(time.Millisecond), letGo.Sub(began).Round(time.Millisecond))
	}
}
