package memory_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

const lease = 10 * time.Second

var errBoom = errors.New("boom")

// open opens a session of lease through b and fails the test on error.
func open(t *testing.T, b simba.Backend) simba.SessionID {
	t.Helper()
	g, err := b.OpenSession(t.Context(), lease)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	return g.ID
}

// timed runs f with a context that ends after d and returns its error and
// how long it took.
func timed(t *testing.T, d time.Duration, f func(ctx context.Context) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	return time.Since(start), err
}

// setup returns a store, a connection to it and a session opened through
// that connection.
func setup(t *testing.T) (*memory.Server, *memory.Conn, simba.SessionID) {
	t.Helper()
	srv := memory.New()
	c := srv.Connect()
	return srv, c, open(t, c)
}

// acquireTimed acquires "job" for id through c with a context that ends
// after d, and returns the error and how long the call took.
func acquireTimed(t *testing.T, c *memory.Conn, id simba.SessionID, d time.Duration) (time.Duration, error) {
	return timed(t, d, func(ctx context.Context) error {
		_, err := c.Acquire(ctx, id, "job")
		return err
	})
}

func TestStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c, id := setup(t)
		c.Stall()
		took, err := acquireTimed(t, c, id, 3*time.Second)
		if !errors.Is(err, context.DeadlineExceeded) || took != 3*time.Second {
			t.Fatalf("stalled Acquire = %v after %v, want DeadlineExceeded after 3s", err, took)
		}
		if _, _, ok := srv.Owner("job"); ok {
			t.Fatal("a stalled Acquire reached the store")
		}
		if got := srv.Calls()[memory.OpAcquire]; got != 0 {
			t.Fatalf("Calls[Acquire] = %d after a stalled call, want 0", got)
		}

		// A call that started while stalled stays lost after Unstall.
		done := make(chan error)
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := c.Acquire(ctx, id, "job")
			done <- err
		}()
		synctest.Wait()
		c.Unstall()
		if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire started while stalled = %v, want DeadlineExceeded", err)
		}
		if _, _, ok := srv.Owner("job"); ok {
			t.Fatal("a call started while stalled reached the store after Unstall")
		}
		time.Sleep(2 * time.Second) // 3s + 5s + 2s: the lease ran out while stalled
		if _, err := c.KeepAlive(t.Context(), id, simba.KeepAliveRequest{Lease: lease}); !errors.Is(err, simba.ErrSessionExpired) {
			t.Fatalf("KeepAlive after a stall longer than the lease = %v, want ErrSessionExpired", err)
		}
		id = open(t, c)
		if r, err := c.Acquire(t.Context(), id, "job"); err != nil || !r.Won {
			t.Fatalf("Acquire after Unstall = %+v, %v; want won", r, err)
		}
	})
}

func TestFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c, id := setup(t)
		c.Fail(errBoom)
		start := time.Now()
		calls := map[string]func() error{
			memory.OpOpenSession:  func() error { _, err := c.OpenSession(t.Context(), lease); return err },
			memory.OpKeepAlive:    func() error { _, err := c.KeepAlive(t.Context(), id, simba.KeepAliveRequest{Lease: lease}); return err },
			memory.OpAcquire:      func() error { _, err := c.Acquire(t.Context(), id, "job"); return err },
			memory.OpRelease:      func() error { return c.Release(t.Context(), id, "job", 1) },
			memory.OpJoinGroup:    func() error { _, err := c.JoinGroup(t.Context(), id, "grp"); return err },
			memory.OpLeaveGroup:   func() error { return c.LeaveGroup(t.Context(), id, "grp") },
			memory.OpCloseSession: func() error { return c.CloseSession(t.Context(), id) },
			memory.OpWatchRelease: func() error { _, err := c.WatchRelease(t.Context(), "job"); return err },
		}
		for op, call := range calls {
			if err := call(); !errors.Is(err, errBoom) {
				t.Errorf("%s on a failing connection = %v, want an error wrapping %v", op, err, errBoom)
			}
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("failing calls took %v, want an immediate error", took)
		}
		if got := srv.Calls(); got[memory.OpOpenSession] != 1 || len(got) != 1 {
			t.Errorf("Calls = %v, want only the first OpenSession", got)
		}

		c.Fail(simba.ErrSessionExpired) // the engine's view of an expiry, the store unchanged
		if _, err := c.KeepAlive(t.Context(), id, simba.KeepAliveRequest{Lease: lease}); !errors.Is(err, simba.ErrSessionExpired) {
			t.Errorf("KeepAlive with Fail(ErrSessionExpired) = %v", err)
		}
		c.Fail(nil)
		if _, err := c.KeepAlive(t.Context(), id, simba.KeepAliveRequest{Lease: lease}); err != nil {
			t.Errorf("KeepAlive after Fail(nil) = %v, want the session still live", err)
		}
	})
}

func TestDropReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c, id := setup(t)
		c.DropReplies(true)
		took, err := acquireTimed(t, c, id, 2*time.Second)
		if !errors.Is(err, context.DeadlineExceeded) || took != 2*time.Second {
			t.Fatalf("Acquire with a lost reply = %v after %v, want DeadlineExceeded after 2s", err, took)
		}
		if owner, tok, ok := srv.Owner("job"); !ok || owner != id || tok != 1 {
			t.Fatalf("Owner = %s, %d, %v; want the lost reply's term (%s, 1) in effect", owner, tok, ok, id)
		}
		// A keep-alive whose reply is lost still renews the session.
		time.Sleep(6 * time.Second) // 8s since OpenSession
		if _, err := timed(t, time.Second, func(ctx context.Context) error {
			_, err := c.KeepAlive(ctx, id, simba.KeepAliveRequest{Lease: lease})
			return err
		}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("KeepAlive with a lost reply = %v", err)
		}
		time.Sleep(8 * time.Second) // 17s since OpenSession, 9s since the renewal reached the store
		if _, _, ok := srv.Owner("job"); !ok {
			t.Fatal("a keep-alive with a lost reply did not renew the session")
		}
		c.DropReplies(false)
		r, err := c.KeepAlive(t.Context(), id, simba.KeepAliveRequest{Lease: lease, Unsure: []string{"job"}})
		if err != nil || r.Owned["job"] != 1 {
			t.Fatalf("KeepAlive after DropReplies(false) = %+v, %v; want job with token 1", r, err)
		}
		if got := c.Calls(); got[memory.OpAcquire] != 1 || got[memory.OpKeepAlive] != 2 {
			t.Fatalf("Conn.Calls = %v, want Acquire 1 and KeepAlive 2: lost replies reached the store", got)
		}
	})
}

func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c, id := setup(t)
		c.Delay(300 * time.Millisecond)
		took, err := acquireTimed(t, c, id, time.Second)
		if err != nil || took != 300*time.Millisecond {
			t.Fatalf("delayed Acquire = %v after %v, want success after 300ms", err, took)
		}
		took, err = timed(t, 100*time.Millisecond, func(ctx context.Context) error {
			return c.Release(ctx, id, "job", 1)
		})
		if !errors.Is(err, context.DeadlineExceeded) || took != 100*time.Millisecond {
			t.Fatalf("Release delayed past its deadline = %v after %v, want DeadlineExceeded after 100ms", err, took)
		}
		if _, tok, ok := srv.Owner("job"); !ok || tok != 1 {
			t.Fatal("a call that timed out during its delay reached the store")
		}
		c.Delay(0)
		if took, _ := timed(t, time.Second, func(ctx context.Context) error {
			return c.Release(ctx, id, "job", 1)
		}); took != 0 {
			t.Fatalf("Release after Delay(0) took %v", took)
		}
		if _, _, ok := srv.Owner("job"); ok {
			t.Fatal("Release after Delay(0) did not free the lease")
		}
	})
}

func TestHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := memory.New().Connect()
		c.Stall()
		c.Fail(errBoom)
		c.DropReplies(true)
		c.Delay(time.Hour)
		c.Heal()
		start := time.Now()
		if _, err := c.OpenSession(t.Context(), lease); err != nil || time.Since(start) != 0 {
			t.Fatalf("OpenSession after Heal = %v after %v, want at once", err, time.Since(start))
		}
	})
}

func TestExpiryIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		id := open(t, srv)
		if _, err := srv.Acquire(t.Context(), id, "job"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		if _, err := srv.KeepAlive(t.Context(), id, simba.KeepAliveRequest{Lease: lease}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease - time.Nanosecond)
		if owner, _, ok := srv.Owner("job"); !ok || owner != id {
			t.Fatal("session ended before its lease ran out")
		}
		time.Sleep(time.Nanosecond)
		if _, _, ok := srv.Owner("job"); ok {
			t.Fatal("session still owns its lease when its lease ran out")
		}
		if got := srv.Sessions(); len(got) != 0 {
			t.Fatalf("Sessions = %v after expiry, want none", got)
		}
		time.Sleep(time.Hour)
		for range 2 {
			if _, err := srv.KeepAlive(t.Context(), id, simba.KeepAliveRequest{Lease: lease}); !errors.Is(err, simba.ErrSessionExpired) {
				t.Fatalf("KeepAlive of an expired session = %v, want ErrSessionExpired", err)
			}
		}
	})
}

func TestExpireSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a, b := open(t, srv), open(t, srv)
		for _, id := range []simba.SessionID{a, b} {
			if _, err := srv.JoinGroup(t.Context(), id, "grp"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := srv.Acquire(t.Context(), a, "job"); err != nil {
			t.Fatal(err)
		}
		if !srv.ExpireSession(a) {
			t.Fatal("ExpireSession of a live session = false")
		}
		if srv.ExpireSession(a) {
			t.Fatal("ExpireSession of an expired session = true")
		}
		if srv.ExpireSession("no-such-session") {
			t.Fatal("ExpireSession of an unknown session = true")
		}
		if _, _, ok := srv.Owner("job"); ok {
			t.Fatal("an expired session still owns its lease")
		}
		if got := srv.Members("grp"); got != 1 {
			t.Fatalf("Members = %d, want 1", got)
		}
		if got := srv.Sessions(); len(got) != 1 || got[0] != b {
			t.Fatalf("Sessions = %v, want [%s]", got, b)
		}
		if _, err := srv.Acquire(t.Context(), a, "job"); !errors.Is(err, simba.ErrSessionExpired) {
			t.Fatalf("Acquire by an expired session = %v, want ErrSessionExpired", err)
		}
	})
}

func TestSetMaxLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		srv.SetMaxLease(4 * time.Second)
		g, err := srv.OpenSession(t.Context(), lease)
		if err != nil || g.Remaining != 4*time.Second {
			t.Fatalf("OpenSession(10s) under a 4s cap = %+v, %v; want 4s", g, err)
		}
		r, err := srv.KeepAlive(t.Context(), g.ID, simba.KeepAliveRequest{Lease: lease})
		if err != nil || r.Remaining != 4*time.Second {
			t.Fatalf("KeepAlive(10s) under a 4s cap = %+v, %v; want 4s", r, err)
		}
		r, err = srv.KeepAlive(t.Context(), g.ID, simba.KeepAliveRequest{Lease: time.Second})
		if err != nil || r.Remaining != time.Second {
			t.Fatalf("KeepAlive(1s) under a 4s cap = %+v, %v; want 1s", r, err)
		}
		time.Sleep(time.Second)
		if got := srv.Sessions(); len(got) != 0 {
			t.Fatalf("Sessions = %v one granted second later, want none", got)
		}
		srv.SetMaxLease(0)
		if g, err := srv.OpenSession(t.Context(), lease); err != nil || g.Remaining != lease {
			t.Fatalf("OpenSession without cap = %+v, %v; want %v", g, err, lease)
		}
	})
}

func TestTakeOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a := open(t, srv)
		if _, err := srv.Acquire(t.Context(), a, "job"); err != nil {
			t.Fatal(err)
		}
		if tok := srv.TakeOver("job"); tok != 2 {
			t.Fatalf("TakeOver = token %d, want 2", tok)
		}
		phantom, tok, ok := srv.Owner("job")
		if !ok || phantom == a || tok != 2 {
			t.Fatalf("Owner after TakeOver = %s, %d, %v; want another session with token 2", phantom, tok, ok)
		}
		r, err := srv.KeepAlive(t.Context(), a, simba.KeepAliveRequest{Lease: lease, Held: map[string]uint64{"job": 1}, Unsure: []string{"job"}})
		if err != nil || len(r.Owned) != 0 || !slices.Equal(r.Lost, []string{"job"}) {
			t.Fatalf("KeepAlive of the previous owner = %+v, %v; want job lost and no lease owned", r, err)
		}
		if r, err := srv.Acquire(t.Context(), a, "job"); err != nil || r.Won {
			t.Fatalf("Acquire by the previous owner = %+v, %v; want not won", r, err)
		}
		time.Sleep(24 * time.Hour)
		if owner, _, ok := srv.Owner("job"); !ok || owner != phantom {
			t.Fatal("the phantom owner expired")
		}
		if got := srv.Sessions(); len(got) != 0 {
			t.Fatalf("Sessions = %v, want the phantom left out", got)
		}
		if tok := srv.TakeOver("other"); tok != 1 {
			t.Fatalf("TakeOver of a new name = %d, want 1", tok)
		}
		if tok := srv.TakeOver("bad name"); tok != 0 {
			t.Fatalf("TakeOver of an invalid name = %d, want 0", tok)
		}
		if !srv.ExpireSession(phantom) {
			t.Fatal("ExpireSession of the phantom = false")
		}
		if _, _, ok := srv.Owner("job"); ok {
			t.Fatal("leases of an expired phantom are still owned")
		}
		if got := srv.LastToken("job"); got != 2 {
			t.Fatalf("LastToken = %d, want 2", got)
		}
	})
}

func TestTokensNeverReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		for want := uint64(1); want <= 3; want++ {
			id := open(t, srv)
			r, err := srv.Acquire(t.Context(), id, "job")
			if err != nil || !r.Won || r.Token != want {
				t.Fatalf("Acquire = %+v, %v; want won with token %d", r, err, want)
			}
			if err := srv.CloseSession(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}
		if got := srv.LastToken("job"); got != 3 {
			t.Fatalf("LastToken = %d, want 3", got)
		}
		if got := srv.LastToken("never"); got != 0 {
			t.Fatalf("LastToken of a name never acquired = %d, want 0", got)
		}
	})
}

func TestSessionIDs(t *testing.T) {
	srv := memory.New()
	seen := make(map[simba.SessionID]bool)
	for range 100 {
		id := open(t, srv)
		if len(id) != 32 || strings.Trim(string(id), "0123456789abcdef") != "" {
			t.Fatalf("session id %q, want 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("session id %s issued twice", id)
		}
		seen[id] = true
	}
}

func TestCalls(t *testing.T) {
	srv := memory.New()
	c1, c2 := srv.Connect(), srv.Connect()
	a, b := open(t, c1), open(t, c2)
	for range 3 {
		if _, err := c1.KeepAlive(t.Context(), a, simba.KeepAliveRequest{Lease: lease}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c2.KeepAlive(t.Context(), b, simba.KeepAliveRequest{Lease: lease}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Acquire(t.Context(), b, "job"); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{memory.OpOpenSession: 2, memory.OpKeepAlive: 4, memory.OpAcquire: 1}
	if got := srv.Calls(); !maps.Equal(got, want) {
		t.Errorf("Server.Calls = %v, want %v", got, want)
	}
	if got, want := c1.Calls(), map[string]int{memory.OpOpenSession: 1, memory.OpKeepAlive: 3}; !maps.Equal(got, want) {
		t.Errorf("c1.Calls = %v, want %v", got, want)
	}
	if got, want := c2.Calls(), map[string]int{memory.OpOpenSession: 1, memory.OpKeepAlive: 1}; !maps.Equal(got, want) {
		t.Errorf("c2.Calls = %v, want %v", got, want)
	}
	srv.Calls()[memory.OpKeepAlive] = 100
	if got := srv.Calls()[memory.OpKeepAlive]; got != 4 {
		t.Errorf("Calls returned the live map: KeepAlive = %d after writing the copy", got)
	}
}

func TestBadInput(t *testing.T) {
	srv := memory.New()
	id := open(t, srv)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		give string
		call func() error
		want error
	}{
		{"Acquire empty name", func() error { _, err := srv.Acquire(t.Context(), id, ""); return err }, simba.ErrInvalidName},
		{"Acquire name with space", func() error { _, err := srv.Acquire(t.Context(), id, "a b"); return err }, simba.ErrInvalidName},
		{"Release name ..", func() error { return srv.Release(t.Context(), id, "..", 1) }, simba.ErrInvalidName},
		{"JoinGroup 129 chars", func() error { _, err := srv.JoinGroup(t.Context(), id, strings.Repeat("g", 129)); return err }, simba.ErrInvalidName},
		{"LeaveGroup name /", func() error { return srv.LeaveGroup(t.Context(), id, "a/b") }, simba.ErrInvalidName},
		{"WatchRelease name .", func() error { _, err := srv.WatchRelease(t.Context(), "."); return err }, simba.ErrInvalidName},
		{"Acquire done context", func() error { _, err := srv.Acquire(done, id, "job"); return err }, context.Canceled},
		{"OpenSession done context", func() error { _, err := srv.OpenSession(done, lease); return err }, context.Canceled},
		{"Acquire unknown session", func() error { _, err := srv.Acquire(t.Context(), "nope", "job"); return err }, simba.ErrSessionExpired},
		{"JoinGroup unknown session", func() error { _, err := srv.JoinGroup(t.Context(), "nope", "grp"); return err }, simba.ErrSessionExpired},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s = %v, want an error wrapping %v", tt.give, err, tt.want)
		}
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := srv.OpenSession(t.Context(), d); err == nil {
			t.Errorf("OpenSession(%v) succeeded, want an error", d)
		}
		if _, err := srv.KeepAlive(t.Context(), id, simba.KeepAliveRequest{Lease: d}); err == nil {
			t.Errorf("KeepAlive(%v) succeeded, want an error", d)
		}
	}
	noOps := []struct {
		give string
		call func() error
	}{
		{"Release unknown session", func() error { return srv.Release(t.Context(), "nope", "job", 1) }},
		{"LeaveGroup unknown session", func() error { return srv.LeaveGroup(t.Context(), "nope", "grp") }},
		{"CloseSession unknown session", func() error { return srv.CloseSession(t.Context(), "nope") }},
	}
	for _, tt := range noOps {
		if err := tt.call(); err != nil {
			t.Errorf("%s = %v, want a no-op", tt.give, err)
		}
	}
}

func TestZeroServer(t *testing.T) {
	var srv memory.Server
	id := open(t, &srv)
	if r, err := srv.Acquire(t.Context(), id, "job"); err != nil || !r.Won || r.Token != 1 {
		t.Fatalf("Acquire on a zero Server = %+v, %v; want won with token 1", r, err)
	}
	if got := srv.Calls(); got[memory.OpAcquire] != 1 {
		t.Fatalf("Calls = %v", got)
	}
}
