package simba_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// R-SES-1: one keep-alive per renew interval, whatever the number of leases.
func TestOneKeepAlivePerInterval(t *testing.T) {
	for _, leases := range []int{1, 50} {
		t.Run(fmt.Sprint(leases), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := memory.New()
				conn := s.Connect()
				c := newClient(t, conn)
				r := newRecorder()
				for i := range leases {
					if err := c.Election(fmt.Sprintf("l%d", i)).Start(r); err != nil {
						t.Fatal(err)
					}
				}
				for range leases {
					r.elected(t, time.Second)
				}
				before := conn.Calls()[memory.OpKeepAlive]
				time.Sleep(10*time.Second + time.Millisecond)
				if got := conn.Calls()[memory.OpKeepAlive] - before; got != 10 {
					t.Fatalf("%d keep-alives in 10 renew intervals with %d leases, want 10", got, leases)
				}
			})
		})
	}
}

// R-SES-3: an expired session is never revived; the client opens a new one
// and contends again, with a higher token.
func TestSessionExpiredOpensNewSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c := newClient(t, s.Connect())
		r := newRecorder()
		if err := c.Election("e").Start(r); err != nil {
			t.Fatal(err)
		}
		t1 := r.elected(t, time.Second)
		old := c.Snapshot().Session.ID
		s.ExpireSession(old)
		r.revoked(t, 2*time.Second, simba.SessionExpired)
		t2 := r.elected(t, 2*time.Second)
		if t2.Token() <= t1.Token() || t2.Session() == old || t1.Valid() {
			t.Fatalf("after expiry: new term %v of %s (old %v of %s, valid %v)", t2, t2.Session(), t1, old, t1.Valid())
		}
	})
}

// R-SES-4: Close frees every lease at once; R-CAND-2: a watching candidate
// takes over at once.
func TestCloseFreesLeasesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c1, _ := simba.New(s.Connect(), simba.WithConfig(testConfig()))
		c2 := newClient(t, s.Connect())
		r1, r2 := newRecorder(), newRecorder()
		_ = c1.Election("e").Start(r1)
		r1.elected(t, time.Second)
		_ = c2.Election("e").Start(r2)
		synctest.Wait()
		start := time.Now()
		if err := c1.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := s.Owner("e"); ok && s.Sessions() == nil {
			t.Fatal("lease still owned after Close")
		}
		r2.elected(t, time.Second)
		if d := time.Since(start); d > 0 {
			t.Fatalf("takeover after %v, want at once", d)
		}
		if r1.calls[len(r1.calls)-1].reason != simba.Stopped {
			t.Fatalf("last callback of the closed client: %+v", r1.calls[len(r1.calls)-1])
		}
	})
}

// R-SES-5: OPENING, LIVE, SUSPENDED, CLOSED.
func TestStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		conn.Stall()
		c := newClient(t, conn)
		synctest.Wait()
		if st := c.Snapshot().Session.Status; st != simba.StatusOpening {
			t.Fatalf("status %v with a stalled backend, want OPENING", st)
		}
		conn.Unstall() // the stalled open times out at 1s, the next one succeeds
		time.Sleep(1500 * time.Millisecond)
		if st := c.Snapshot().Session.Status; st != simba.StatusLive {
			t.Fatalf("status %v, want LIVE", st)
		}
		conn.Fail(errors.New("boom"))
		time.Sleep(1100 * time.Millisecond)
		if st := c.Snapshot().Session.Status; st != simba.StatusSuspended {
			t.Fatalf("status %v after a failed keep-alive, want SUSPENDED", st)
		}
		conn.Fail(nil)
		_ = c.Close(context.Background())
		if st := c.Snapshot().Session.Status; st != simba.StatusClosed {
			t.Fatalf("status %v after Close, want CLOSED", st)
		}
	})
}

// R-DL-1: deadline = sentAt + remaining*(1-drift) - margin, with sentAt the
// send time of the keep-alive (a slow reply only shortens the deadline).
func TestLocalDeadlineFormula(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		cfg := simba.Config{LeaseDuration: 10 * time.Second, RenewInterval: 2 * time.Second, Drift: 0.1, Margin: 100 * time.Millisecond}
		c := newClient(t, conn, simba.WithConfig(cfg))
		r := newRecorder()
		_ = c.Election("e").Start(r)
		term := r.elected(t, time.Second)
		// Open was sent at 0 with no delay: deadline = 10s*0.9 - 100ms = 8.9s.
		if got, want := term.Remaining(), 8900*time.Millisecond; got != want {
			t.Fatalf("remaining %v, want %v", got, want)
		}
		conn.Delay(300 * time.Millisecond) // the keep-alive at 2s reaches the server at 2.3s
		time.Sleep(2400 * time.Millisecond)
		// Sent at 2s, renewed by the server at 2.3s for 10s: the local view
		// starts at the send time, so at 2.4s 2s+8.9s-2.4s = 8.5s are left.
		want := 8500 * time.Millisecond
		if got := term.Remaining(); got != want {
			t.Fatalf("remaining %v after a slow keep-alive, want %v", got, want)
		}
	})
}

// R-DL-2, R-DL-3: a stalled backend: every call times out after the renew
// period, the session ends at its deadline with DEADLINE_PASSED, terms stay
// ended after the backend comes back.
func TestDeadlinePassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		c := newClient(t, conn)
		r := newRecorder()
		_ = c.Election("e").Start(r)
		term := r.elected(t, time.Second)
		start := time.Now()
		conn.Stall() // right after the open at t=0: the last renewal is the open
		got := r.revoked(t, 10*time.Second, simba.DeadlinePassed)
		if got != term || term.Valid() || term.Reason() != simba.DeadlinePassed {
			t.Fatalf("revoked %v valid=%v reason=%v", got, term.Valid(), term.Reason())
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("revoked after %v, want at the deadline 3s", d)
		}
		conn.Unstall()
		t2 := r.elected(t, 5*time.Second)
		if term.Valid() || t2.Token() <= term.Token() {
			t.Fatalf("old term valid=%v, new token %d after %d", term.Valid(), t2.Token(), term.Token())
		}
	})
}

// R-DL-3: a reply that arrives after the deadline never extends it.
func TestLateRenewalDoesNotExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		cfg := testConfig()
		cfg.RenewInterval = 1500 * time.Millisecond
		c := newClient(t, conn, simba.WithConfig(cfg))
		r := newRecorder()
		_ = c.Election("e").Start(r)
		term := r.elected(t, time.Second)
		conn.DropReplies(true) // keep-alives reach the server, replies are lost
		r.revoked(t, 10*time.Second, simba.DeadlinePassed)
		if term.Valid() {
			t.Fatal("term valid after its deadline")
		}
	})
}

// R-DL-3, R-TERM-4: a keep-alive reply that arrives before the deadline
// but is applied after it (the session loop paused in between) does not
// extend the deadline: the term that read invalid stays invalid and is
// revoked with DeadlinePassed.
func TestRenewalAppliedAfterDeadlineDoesNotRevive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		events := make(chan simba.Event, 100)
		c := newClient(t, conn, simba.WithEventListener(func(_ context.Context, e simba.Event) { events <- e }))
		r := newRecorder()
		_ = c.Election("e").Start(r)
		term := r.elected(t, time.Second)

		var paused atomic.Bool
		seenInvalid := make(chan bool, 1)
		restore := simba.SetKeepAliveReplyHook(func() {
			if !paused.CompareAndSwap(false, true) {
				return
			}
			// The reply is in hand, before the deadline; the loop stalls
			// past the deadline before applying it.
			time.Sleep(term.Remaining() + time.Millisecond)
			seenInvalid <- term.Valid()
		})
		defer restore()

		if valid := <-seenInvalid; valid {
			t.Fatal("term valid past its deadline")
		}
		got := r.revoked(t, time.Second, simba.DeadlinePassed)
		if got != term || term.Valid() || term.Remaining() != 0 || term.Reason() != simba.DeadlinePassed {
			t.Fatalf("revoked %v valid=%v remaining=%v reason=%v", got, term.Valid(), term.Remaining(), term.Reason())
		}
		for {
			e := <-events
			if e.Kind == simba.EventSessionDeadlinePassed {
				break
			}
			if e.Kind == simba.EventSessionRestored {
				t.Fatalf("session restored by a renewal applied after the deadline")
			}
		}
		t2 := r.elected(t, 5*time.Second)
		if term.Valid() || t2.Token() <= term.Token() {
			t.Fatalf("old term valid=%v, new token %d after %d", term.Valid(), t2.Token(), term.Token())
		}
	})
}

// R-DL-4: after a failed keep-alive the client retries with backoff: half
// the time left, capped at renewInterval, at least minBackoff.
func TestKeepAliveBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		rec := &timedBackend{Backend: conn, start: time.Now()}
		cfg := simba.Config{LeaseDuration: 8 * time.Second, RenewInterval: 2 * time.Second, NoDrift: true, NoMargin: true, MinBackoff: 500 * time.Millisecond}
		newClient(t, rec, simba.WithConfig(cfg))
		synctest.Wait()
		conn.Fail(errors.New("down"))
		time.Sleep(9 * time.Second)
		conn.Fail(nil)
		// Deadline 8s. Keep-alives at 2s (fails; 6s left: wait min(3s, 2s)),
		// 4s (4s left: 2s), 6s (2s left: 1s), 7s (1s left: 0.5s), 7.5s (0.5s
		// left: at least minBackoff 0.5s, the deadline), then a new session.
		want := []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second, 7 * time.Second, 7500 * time.Millisecond}
		if got := rec.times(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("keep-alive attempts at %v, want %v", got, want)
		}
	})
}

// timedBackend records when each keep-alive is sent.
type timedBackend struct {
	simba.Backend
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
}

func (b *timedBackend) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	b.mu.Lock()
	b.at = append(b.at, time.Since(b.start))
	b.mu.Unlock()
	return b.Backend.KeepAlive(ctx, s, req)
}

func (b *timedBackend) times() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.at...)
}

// R-DL-5: a backend that grants less than asked: renew every third of the
// granted validity, and publish SessionLeaseShortened once per session.
func TestShortenedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		s.SetMaxLease(1500 * time.Millisecond)
		conn := s.Connect()
		var mu sync.Mutex
		shortened := 0
		c := newClient(t, conn, simba.WithEventListener(func(_ context.Context, e simba.Event) {
			if e.Kind == simba.EventSessionLeaseShortened {
				mu.Lock()
				shortened++
				mu.Unlock()
			}
		}))
		r := newRecorder()
		_ = c.Election("e").Start(r)
		term := r.elected(t, time.Second)
		before := conn.Calls()[memory.OpKeepAlive]
		time.Sleep(5*time.Second + time.Millisecond)
		if got := conn.Calls()[memory.OpKeepAlive] - before; got != 10 {
			t.Fatalf("%d keep-alives in 5s with a 1.5s grant, want 10 (every 500ms)", got)
		}
		if !term.Valid() {
			t.Fatal("term ended under a shortened lease")
		}
		if snap := c.Snapshot().Session; !snap.Shortened || snap.Renew != 500*time.Millisecond {
			t.Fatalf("snapshot %+v", snap)
		}
		mu.Lock()
		defer mu.Unlock()
		if shortened != 1 {
			t.Fatalf("SessionLeaseShortened published %d times, want once", shortened)
		}
	})
}

// A client built WithDeferredStart makes no backend call and runs nothing
// before Start; a lock taken after Start waits for the session Start
// opens (the calls before Start fail: TestCallsBeforeADeferredStartFailAtOnce).
func TestDeferredStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		c := newClient(t, conn, simba.WithDeferredStart())
		time.Sleep(time.Minute)
		if calls := conn.Calls(); len(calls) != 0 {
			t.Fatalf("backend calls before Start: %v", calls)
		}
		if st := c.Snapshot().Session.Status; st != simba.StatusOpening {
			t.Fatalf("status %v before Start, want OPENING", st)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatalf("second Start: %v", err)
		}
		lt, err := c.Lock("deferred").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !lt.Valid() {
			t.Fatal("the lock taken right after Start is not valid")
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ids := s.Sessions(); len(ids) != 0 {
			t.Fatalf("sessions after Close: %v", ids)
		}
		if err := c.Start(); !errors.Is(err, simba.ErrClosed) {
			t.Fatalf("Start after Close: %v, want ErrClosed", err)
		}
	})
}

// Closing a client that never started makes no backend call and returns
// at once.
func TestCloseOfAClientNeverStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memory.New().Connect()
		var log eventLog
		c, err := simba.New(conn, simba.WithDeferredStart(), simba.WithEventListener(log.listen))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close took %v", d)
		}
		if calls := conn.Calls(); len(calls) != 0 {
			t.Fatalf("backend calls: %v", calls)
		}
		if err := c.Start(); !errors.Is(err, simba.ErrClosed) {
			t.Fatalf("Start after Close: %v, want ErrClosed", err)
		}
	})
}
