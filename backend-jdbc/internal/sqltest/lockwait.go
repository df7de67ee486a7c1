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
	type result struct {
		r   simba.KeepAliveReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		r, err := b.KeepAlive(ctx, s, time.Minute)
		done <- result{r, err}
	}()
	await(t, "keep-alive waiting for the row lock", func() bool { return f.lockWaits(t) > 0 })
	await(t, "expiry of the session", func() bool { return f.expired(t, s) })
	if err := commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	res := <-done
	if !errors.Is(res.err, simba.ErrSessionExpired) {
		t.Fatalf("KeepAlive after waiting past the expiry = %+v, %v; want simba.ErrSessionExpired", res.r, res.err)
	}
	if _, err := b.KeepAlive(ctxT(t), s, time.Minute); !errors.Is(err, simba.ErrSessionExpired) {
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
			type result struct {
				r   simba.AcquireResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				r, err := b.Acquire(ctx, s, name)
				done <- result{r, err}
			}()
			var res *result
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
					t.Fatalf("Acquire returned %+v, %v without waiting for the locked %s row", res.r, res.err, tt.locked)
				}
				t.Logf("Acquire decided without waiting for the session row, before the expiry: %+v", res.r)
				return
			}
			await(t, "expiry of the session", func() bool { return f.expired(t, s) })
			if err := commit(); err != nil {
				t.Fatalf("commit: %v", err)
			}
			r := <-done
			if r.r.Won || (r.err != nil && !errors.Is(r.err, simba.ErrSessionExpired)) {
				t.Fatalf("Acquire after waiting past the caller's expiry = %+v, %v; want no win (simba.ErrSessionExpired, or lost)", r.r, r.err)
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
